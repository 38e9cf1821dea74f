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

// TestResyncInProcess: the second Manager's Notifier is not the first's,
// so it hears no announcement and learns the change by re-syncing.
func TestResyncInProcess(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "w.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	first, second := notify.NewLocal(), notify.NewLocal()
	t.Cleanup(first.Close)
	t.Cleanup(second.Close)
	nodes := 0
	settingstest.RunResync(t, st, func(*testing.T) notify.Notifier {
		nodes++
		if nodes == 1 {
			return first
		}
		return second
	}, func() {}, func() {})
}
