package sim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/wamux/wamux/sim"
)

// sendN sends n messages at the harness's current instant and returns how
// many were accepted.
func (h *harness) sendN(n int, prefix string) int {
	h.t.Helper()
	accepted := 0
	for i := range n {
		if code, _, _ := h.send(num, token, text(fmt.Sprintf("%s%04d", prefix, i), "")); code == 200 {
			accepted++
		}
	}
	return accepted
}

// TestStrictSecondCountsEveryOneSecondWindow: a number of 10/s with a
// burst of 10 takes 10 at once. Half a second later its bucket has room
// for 5 more, which a provider counting every one-second window refuses:
// 15 would be in the second before. The windows slide: the first instant
// is 600 ms into a calendar second, so a count per calendar second would
// have started afresh by then.
func TestStrictSecondCountsEveryOneSecondWindow(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(fmt.Sprintf("strict=%v", strict), func(t *testing.T) {
			h := start(t, sim.Config{Limits: sim.Limits{Rate: 10, Burst: 10, StrictSecond: strict}})
			h.clk.Advance(600 * time.Millisecond)
			if got := h.sendN(12, "1555100"); got != 10 {
				t.Fatalf("accepted %d of 12 at once, want the burst of 10", got)
			}
			h.clk.Advance(500 * time.Millisecond)
			got := h.sendN(6, "1555200")
			if want := map[bool]int{false: 5, true: 0}[strict]; got != want {
				t.Fatalf("half a second later accepted %d of 6, want %d", got, want)
			}
			if !strict {
				return
			}
			// Exactly one second after the first ten, they are out of
			// the window (t-1s, t]: ten more fit, and the bucket has them.
			h.clk.Advance(500 * time.Millisecond)
			if got := h.sendN(12, "1555300"); got != 10 {
				t.Fatalf("one second after the first ten accepted %d of 12, want 10", got)
			}
			h.clk.Advance(999 * time.Millisecond)
			if got := h.sendN(1, "1555400"); got != 0 {
				t.Fatalf("999 ms after ten accepted %d, want none", got)
			}
			st := h.s.Stats().Numbers[num]
			if st.Accepted != 20 || st.OverLimit != 2+6+2+1 || st.PeakAcceptedPerSec > 10 {
				t.Fatalf("stats %+v, want 20 accepted, 11 over the limit, no second above 10", st)
			}
		})
	}
}

// TestJitterHoldsRequestsBeforeTheyAreCounted: with Jitter each request
// waits a draw from [0, Jitter] before the simulator counts it, so the
// time it is counted at (accepted_at) lies after the request left, by up
// to the jitter. Twenty draws from [0, 60 ms] all below 10 ms would be a
// one-in-10^15 event; a machine under load only adds to the waits.
func TestJitterHoldsRequestsBeforeTheyAreCounted(t *testing.T) {
	h := start(t, sim.Config{Clock: time.Now, Limits: sim.Limits{Rate: 1000}, Faults: sim.Faults{Jitter: 60 * time.Millisecond}})
	var longest time.Duration
	for i := range 20 {
		left := time.Now()
		if code, body, _ := h.send(num, token, text(fmt.Sprintf("1555500%04d", i), fmt.Sprint("cb", i))); code != 200 {
			t.Fatalf("send %d: %d %s", i, code, body)
		}
		msgs := h.s.Messages(num, "")
		longest = max(longest, msgs[len(msgs)-1].AcceptedAt.Sub(left))
	}
	if longest < 10*time.Millisecond {
		t.Fatalf("the longest hold before a request was counted is %v, want draws up to 60 ms", longest)
	}
	if _, err := sim.New(sim.Config{Faults: sim.Faults{Jitter: -time.Millisecond}}); err == nil {
		t.Fatal("a negative jitter was accepted")
	}
}
