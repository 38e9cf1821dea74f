// Package settingstest checks settings.Manager sharing over a
// notify.Notifier: the in-process one and the Redis one run it.
package settingstest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/notify"
	"github.com/wamux/wamux/settings"
)

// Within is how soon a change must reach every node.
const Within = time.Second

// RunShared checks that a change made through one of two Managers over
// one store reaches the other, and its listeners, within a second.
// newNode returns the Notifier of each node (the same one, or one per
// node sharing their topics).
func RunShared(t *testing.T, st settings.Store, newNode func(t *testing.T) notify.Notifier) {
	ctx := context.Background()
	var ms [2]*settings.Manager
	for i := range ms {
		m, err := settings.Load(ctx, st, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		stop, err := m.Share(ctx, settings.ShareConfig{Notifier: newNode(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		ms[i] = m
	}
	changed := make(chan settings.Values, 4)
	ms[1].OnChange(func(_, next settings.Values) { changed <- next })
	for i, change := range []map[string]string{
		{"pair_interval": "9s", "bloom": "false"},
		{"pair_interval": "7s"},
	} {
		start := time.Now()
		if _, err := ms[0].Update(ctx, change); err != nil {
			t.Fatal(err)
		}
		timeout := time.NewTimer(Within)
		select {
		case v := <-changed:
			if v.PairInterval != ms[0].Current().PairInterval || v.Bloom {
				t.Fatalf("change %d: the other node's listener saw %+v", i, v)
			}
			t.Logf("change %d reached the other node in %v", i, time.Since(start))
		case <-timeout.C:
			t.Fatalf("change %d did not reach the other node within %v", i, Within)
		}
		timeout.Stop()
		if c, want := ms[1].Current(), ms[0].Current(); c != want {
			t.Fatalf("change %d: the other node has %+v, want %+v", i, c, want)
		}
	}
}

// Timers runs a shared Manager's re-syncs on c: they happen within the
// Advance that reaches them.
func Timers(c *fakeclock.Clock) settings.TimerClock { return timers{c} }

type timers struct{ c *fakeclock.Clock }

func (t timers) AfterFunc(d time.Duration, f func()) func() bool { return t.c.AfterFunc(d, f).Stop }

// RunResync checks that a shared Manager that missed an announcement
// (cut, called after both Managers share, makes the second node miss
// what the first announces until restore) reads the change at its next
// re-sync, ResyncEvery after it began sharing, and no earlier; restore
// is called before the test ends.
func RunResync(t *testing.T, st settings.Store, newNode func(t *testing.T) notify.Notifier, cut, restore func()) {
	ctx := context.Background()
	clk := fakeclock.New()
	const every = 30 * time.Second
	var ms [2]*settings.Manager
	for i := range ms {
		m, err := settings.Load(ctx, st, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		stop, err := m.Share(ctx, settings.ShareConfig{Notifier: newNode(t), ResyncEvery: every, Clock: Timers(clk)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		ms[i] = m
	}
	changed := make(chan settings.Values, 4)
	ms[1].OnChange(func(_, next settings.Values) { changed <- next })
	cut()
	if _, err := ms[0].Update(ctx, map[string]string{"pair_interval": "9s"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(every - time.Second)
	if got := ms[1].Current().PairInterval; got == 9*time.Second {
		t.Fatal("the cut-off node saw the change before its re-sync")
	}
	clk.Advance(time.Second)
	if got := ms[1].Current().PairInterval; got != 9*time.Second {
		t.Fatalf("after its re-sync the cut-off node has pair_interval %v, want 9s", got)
	}
	if v := <-changed; v.PairInterval != 9*time.Second {
		t.Fatalf("the cut-off node's listener saw %+v", v)
	}
	// The re-sync repeats.
	if _, err := ms[0].Update(ctx, map[string]string{"pair_interval": "7s"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(every)
	if got := ms[1].Current().PairInterval; got != 7*time.Second {
		t.Fatalf("after its second re-sync the cut-off node has pair_interval %v, want 7s", got)
	}
	restore()
}
