package settings_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/store/sqlite"
)

func TestUpdatePersistsAndNotifies(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "w.db")
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := settings.Load(ctx, st, log)
	if err != nil {
		t.Fatal(err)
	}
	if m.Current() != settings.Defaults() {
		t.Fatalf("fresh store: %+v", m.Current())
	}
	var seen []time.Duration
	m.OnChange(func(old, next settings.Values) { seen = append(seen, old.GapTimeout, next.GapTimeout) })
	if _, err := m.Update(ctx, map[string]string{"gap_timeout": "90s", "bloom": "false"}); err != nil {
		t.Fatal(err)
	}
	if c := m.Current(); c.GapTimeout != 90*time.Second || c.Bloom {
		t.Fatalf("after update: %+v", c)
	}
	if len(seen) != 2 || seen[0] != 5*time.Minute || seen[1] != 90*time.Second {
		t.Fatalf("listener saw %v", seen)
	}
	st.Close()

	st2, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	m2, err := settings.Load(ctx, st2, log)
	if err != nil {
		t.Fatal(err)
	}
	if c := m2.Current(); c.GapTimeout != 90*time.Second || c.Bloom || c.QuietPeriod != 30*time.Second {
		t.Fatalf("after restart: %+v", c)
	}
}

func TestBadChangesChangeNothing(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "w.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m, _ := settings.Load(ctx, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	bad := []map[string]string{
		{"gap_timeout": "soon"},
		{"gap_timeout": "-1s"},
		{"max_attempts": "0"},
		{"bloom": "maybe"},
		{"no_such_key": "1"},
		{"quiet_period": "1m", "backoff_base": "2m", "backoff_cap": "1m"},
		{"cooldown_min": "5m"},
	}
	for _, b := range bad {
		if _, err := m.Update(ctx, b); wamux.ErrorCode(err) != wamux.EInvalid {
			t.Errorf("%v: err = %v, want invalid", b, err)
		}
	}
	if m.Current() != settings.Defaults() {
		t.Fatalf("a refused change altered the snapshot: %+v", m.Current())
	}
	if stored, _ := st.Settings(ctx); len(stored) != 0 {
		t.Fatalf("a refused change was stored: %v", stored)
	}
	if len(settings.Keys()) != len(settings.Defaults().Map()) {
		t.Fatal("Keys and Map disagree")
	}
}
