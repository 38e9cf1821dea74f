package settings_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/wamux/wamux/notify"
	"github.com/wamux/wamux/settings/settingstest"
	"github.com/wamux/wamux/store/sqlite"
)

// TestSharedInProcess: two Managers over one store, told of each other's
// changes by the in-process Notifier.
func TestSharedInProcess(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "w.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	n := notify.NewLocal()
	t.Cleanup(n.Close)
	settingstest.RunShared(t, st, func(*testing.T) notify.Notifier { return n })
}
