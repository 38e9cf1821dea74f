package redisnotify_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/wamux/wamux/internal/redistest"
	"github.com/wamux/wamux/notify"
	"github.com/wamux/wamux/notify/notifytest"
	"github.com/wamux/wamux/notify/redisnotify"
	"github.com/wamux/wamux/settings/settingstest"
	"github.com/wamux/wamux/store/sqlite"
)

// TestConformance runs the suite with every Notifier of a test a node of
// its own (a client of its own) on one prefix.
func TestConformance(t *testing.T) {
	prefixes := map[*testing.T]string{}
	notifytest.Run(t, func(t *testing.T) notify.Notifier {
		rdb, prefix := redistest.Client(t)
		if p, ok := prefixes[t]; ok {
			prefix = p
		}
		prefixes[t] = prefix
		n, err := redisnotify.New(redisnotify.Config{Client: rdb, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}, notifytest.Options{Nodes: true})
}

// TestSettingsReachEveryNode: a settings change on one node reaches a
// second node's Manager over one store through Redis within a second.
func TestSettingsReachEveryNode(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "w.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	_, prefix := redistest.Client(t)
	settingstest.RunShared(t, st, func(t *testing.T) notify.Notifier {
		rdb, _ := redistest.Client(t)
		n, err := redisnotify.New(redisnotify.Config{Client: rdb, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return n
	})
}
