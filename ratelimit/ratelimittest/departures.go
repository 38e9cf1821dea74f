package ratelimittest

import (
	"fmt"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/ratelimit"
)

// NewDepartures builds a fresh Departures, with nothing booked, that reads
// time from clock.
type NewDepartures func(t *testing.T, clock wamux.Clock) ratelimit.Departures

// DeparturesOptions describe what a Departures implementation can do.
type DeparturesOptions struct {
	// NewNode, when set, builds a second Departures sharing the schedules
	// of the one the last NewDepartures call of the same test built.
	NewNode NewDepartures
}

// RunDepartures runs the departure schedule suite: the burst leaves at
// once and the rest one interval apart, a request ready after its time
// leaves at once, accounts are independent, no window holds more than
// the bound, and (for shared implementations) two nodes booking for one
// account book on one schedule.
func RunDepartures(t *testing.T, newDep NewDepartures, opts DeparturesOptions) {
	t.Run("BurstThenInterval", func(t *testing.T) {
		clk := fakeclock.New()
		d := newDep(t, clk)
		wantWaits(t, []ratelimit.Departures{d}, "a", 10, 3, []time.Duration{0, 0, 0, 100 * time.Millisecond, 200 * time.Millisecond})
	})
	t.Run("LateRequestLeavesAtOnce", func(t *testing.T) {
		clk := fakeclock.New()
		d := newDep(t, clk)
		wantWaits(t, []ratelimit.Departures{d}, "a", 10, 1, []time.Duration{0, 100 * time.Millisecond})
		clk.Advance(time.Second)
		wantWaits(t, []ratelimit.Departures{d}, "a", 10, 1, []time.Duration{0, 100 * time.Millisecond})
	})
	t.Run("AccountsIndependent", func(t *testing.T) {
		clk := fakeclock.New()
		d := newDep(t, clk)
		wantWaits(t, []ratelimit.Departures{d}, "a", 10, 1, []time.Duration{0, 100 * time.Millisecond})
		wantWaits(t, []ratelimit.Departures{d}, "b", 10, 1, []time.Duration{0, 100 * time.Millisecond})
	})
	t.Run("WindowBound", func(t *testing.T) {
		clk := fakeclock.New()
		d := newDep(t, clk)
		checkWindows(t, clk, []ratelimit.Departures{d})
	})
	if opts.NewNode != nil {
		t.Run("NodesShareOneSchedule", func(t *testing.T) {
			clk := fakeclock.New()
			a := newDep(t, clk)
			b := opts.NewNode(t, clk)
			wantWaits(t, []ratelimit.Departures{a, b}, "a", 10, 1,
				[]time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond})
			clk2 := fakeclock.New()
			a, b = newDep(t, clk2), opts.NewNode(t, clk2)
			checkWindows(t, clk2, []ratelimit.Departures{a, b})
		})
	}
}

// wantWaits books one request per want, taking the nodes in turn, all
// ready at the clock's now.
func wantWaits(t *testing.T, nodes []ratelimit.Departures, acc string, rate float64, burst int, want []time.Duration) {
	t.Helper()
	for i, w := range want {
		got, err := nodes[i%len(nodes)].Reserve(t.Context(), acc, rate, burst)
		if err != nil {
			t.Fatalf("Reserve: %v", err)
		}
		if got != w {
			t.Fatalf("booking %d of %s (rate %v, burst %d) waits %v, want %v", i, acc, rate, burst, got, w)
		}
	}
}

// checkWindows books requests ready in bunches (several at once, then a
// pause) on the nodes in turn and checks that no one-second window of
// departures holds more than rate + burst.
func checkWindows(t *testing.T, clk *fakeclock.Clock, nodes []ratelimit.Departures) {
	t.Helper()
	const rate, burst = 20.0, 4
	start := clk.Now()
	var leave []time.Duration
	for step := range 60 {
		for i := range 1 + step%7 {
			w, err := nodes[(step+i)%len(nodes)].Reserve(t.Context(), "acc", rate, burst)
			if err != nil {
				t.Fatalf("Reserve: %v", err)
			}
			leave = append(leave, clk.Now().Add(w).Sub(start))
		}
		clk.Advance(time.Duration(step%5) * 40 * time.Millisecond)
	}
	for i := range leave {
		n := 0
		for _, l := range leave {
			if l >= leave[i] && l < leave[i]+time.Second {
				n++
			}
		}
		if n > int(rate)+burst {
			t.Fatalf("%s", fmt.Sprintf("%d departures in the second from %v; the bound is %d", n, leave[i], int(rate)+burst))
		}
	}
}
