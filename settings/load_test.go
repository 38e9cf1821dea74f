package settings_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/store/sqlite"
)

// A change that is valid as a whole (cooldown_min above the default
// cooldown_max, raised together with it) must survive a restart: Load
// must not check each stored key alone against the defaults.
func TestLoadKeepsJointlyValidSettings(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "w.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := settings.Load(ctx, st, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Update(ctx, map[string]string{"cooldown_min": "5m", "cooldown_max": "10m",
		"backoff_base": "100ms", "backoff_cap": "500ms"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ { // map order is random: try several restarts
		m2, err := settings.Load(ctx, st, log)
		if err != nil {
			t.Fatal(err)
		}
		c := m2.Current()
		if c.CooldownMin != 5*time.Minute || c.CooldownMax != 10*time.Minute ||
			c.BackoffBase != 100*time.Millisecond || c.BackoffCap != 500*time.Millisecond {
			t.Fatalf("restart %d lost stored settings: cooldown %s..%s backoff %s..%s", i,
				c.CooldownMin, c.CooldownMax, c.BackoffBase, c.BackoffCap)
		}
	}
}
