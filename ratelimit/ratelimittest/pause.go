package ratelimittest

import (
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/ratelimit"
)

// NewAppPause builds a fresh AppPause, with no app paused, that reads time
// from clock.
type NewAppPause func(t *testing.T, clock wamux.Clock) ratelimit.AppPause

// AppPauseOptions describe what an AppPause implementation can do.
type AppPauseOptions struct {
	// NewNode, when set, builds a second AppPause sharing the pauses of
	// the one the last NewAppPause call of the same test built.
	NewNode NewAppPause
}

// RunAppPause runs the app pause suite: a pause holds until its end, a
// later one extends it, an earlier one never shortens it, apps are
// independent, and (for shared implementations) every node sees a pause
// any node set.
func RunAppPause(t *testing.T, newPause NewAppPause, opts AppPauseOptions) {
	t.Run("HoldsUntilItsEnd", func(t *testing.T) { testPauseHolds(t, newPause) })
	t.Run("LaterExtendsEarlierNeverShortens", func(t *testing.T) { testPauseExtends(t, newPause) })
	t.Run("PastPauseIsNone", func(t *testing.T) { testPausePast(t, newPause) })
	t.Run("AppsIndependent", func(t *testing.T) { testPauseIndependent(t, newPause) })
	t.Run("ConcurrentLatestWins", func(t *testing.T) { testPauseConcurrent(t, newPause, nil) })
	if opts.NewNode != nil {
		t.Run("NodesSeeOnePause", func(t *testing.T) { testPauseConcurrent(t, newPause, opts.NewNode) })
	}
}

func pausedUntil(t *testing.T, p ratelimit.AppPause, app string) time.Time {
	t.Helper()
	u, err := p.PausedUntil(t.Context(), app)
	if err != nil {
		t.Fatalf("PausedUntil(%s): %v", app, err)
	}
	return u
}

func pause(t *testing.T, p ratelimit.AppPause, app string, until time.Time) time.Time {
	t.Helper()
	u, err := p.Pause(t.Context(), app, until)
	if err != nil {
		t.Fatalf("Pause(%s, %v): %v", app, until, err)
	}
	return u
}

func testPauseHolds(t *testing.T, newPause NewAppPause) {
	clk := fakeclock.New()
	p := newPause(t, clk)
	if u := pausedUntil(t, p, "app"); !u.IsZero() {
		t.Fatalf("a fresh app is paused until %v", u)
	}
	end := clk.Now().Add(5 * time.Minute)
	if u := pause(t, p, "app", end); !u.Equal(end) {
		t.Fatalf("Pause returned %v, want %v", u, end)
	}
	clk.Advance(5*time.Minute - time.Millisecond)
	if u := pausedUntil(t, p, "app"); !u.Equal(end) {
		t.Fatalf("a millisecond before its end the pause reads %v, want %v", u, end)
	}
	clk.Advance(time.Millisecond)
	if u := pausedUntil(t, p, "app"); !u.IsZero() {
		t.Fatalf("at its end the pause still reads %v", u)
	}
}

func testPauseExtends(t *testing.T, newPause NewAppPause) {
	clk := fakeclock.New()
	p := newPause(t, clk)
	now := clk.Now()
	pause(t, p, "app", now.Add(time.Minute))
	if u := pause(t, p, "app", now.Add(30*time.Second)); !u.Equal(now.Add(time.Minute)) {
		t.Fatalf("an earlier pause made it %v, want the minute kept", u)
	}
	if u := pausedUntil(t, p, "app"); !u.Equal(now.Add(time.Minute)) {
		t.Fatalf("after an earlier pause: %v, want the minute kept", u)
	}
	if u := pause(t, p, "app", now.Add(2*time.Minute)); !u.Equal(now.Add(2 * time.Minute)) {
		t.Fatalf("a later pause made it %v, want 2 minutes", u)
	}
	clk.Advance(90 * time.Second)
	if u := pausedUntil(t, p, "app"); !u.Equal(now.Add(2 * time.Minute)) {
		t.Fatalf("90 s in: %v, want paused until the extended end", u)
	}
}

func testPausePast(t *testing.T, newPause NewAppPause) {
	clk := fakeclock.New()
	p := newPause(t, clk)
	if u := pause(t, p, "app", clk.Now().Add(-time.Second)); !u.IsZero() {
		t.Fatalf("a pause ending in the past returned %v, want none", u)
	}
	if u := pause(t, p, "app", clk.Now()); !u.IsZero() {
		t.Fatalf("a pause ending now returned %v, want none", u)
	}
	if u := pausedUntil(t, p, "app"); !u.IsZero() {
		t.Fatalf("after pauses ending in the past: paused until %v", u)
	}
	// A pause over is forgotten: a new one, shorter than it was, holds.
	pause(t, p, "app", clk.Now().Add(time.Hour))
	clk.Advance(2 * time.Hour)
	end := clk.Now().Add(time.Second)
	if u := pause(t, p, "app", end); !u.Equal(end) {
		t.Fatalf("a pause after the last one ended: %v, want %v", u, end)
	}
}

func testPauseIndependent(t *testing.T, newPause NewAppPause) {
	clk := fakeclock.New()
	p := newPause(t, clk)
	pause(t, p, "a", clk.Now().Add(time.Minute))
	if u := pausedUntil(t, p, "b"); !u.IsZero() {
		t.Fatalf("app b paused until %v by a's pause", u)
	}
}

// testPauseConcurrent: pauses set at once, through one AppPause or two
// nodes', leave the latest end in force, and every node reads it.
func testPauseConcurrent(t *testing.T, first, second NewAppPause) {
	clk := fakeclock.New()
	nodes := []ratelimit.AppPause{first(t, clk)}
	if second != nil {
		nodes = append(nodes, second(t, clk))
	} else {
		nodes = append(nodes, nodes[0])
	}
	now := clk.Now()
	var wg sync.WaitGroup
	for i := range 20 {
		p := nodes[i%2]
		wg.Go(func() {
			if _, err := p.Pause(t.Context(), "app", now.Add(time.Duration(i+1)*time.Second)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i, p := range nodes {
		if u := pausedUntil(t, p, "app"); !u.Equal(now.Add(20 * time.Second)) {
			t.Fatalf("node %d reads the pause until %v, want the latest, %v", i, u, now.Add(20*time.Second))
		}
	}
}
