package ratelimit_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/ratelimit"
)

func newPairs(t *testing.T, clk wamux.Clock, interval time.Duration, burst int) *ratelimit.PairLimiter {
	t.Helper()
	p, err := ratelimit.NewPairLimiter(ratelimit.PairConfig{Clock: clk, Interval: interval, Burst: burst})
	if err != nil {
		t.Fatalf("NewPairLimiter: %v", err)
	}
	return p
}

func TestPairBurstThenPace(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New()
	p := newPairs(t, clk, 0, 0) // defaults: 6 s, burst 3
	for i := range ratelimit.DefaultPairBurst {
		if ok, w := p.Reserve("acct", "+1"); !ok {
			t.Fatalf("send %d of the burst refused, wait %v", i+1, w)
		}
	}
	// The burst borrowed three intervals: nothing more for 18 s.
	if ok, w := p.Reserve("acct", "+1"); ok || w != 3*ratelimit.DefaultPairInterval {
		t.Fatalf("send after the burst: ok=%v wait=%v, want refused for %v", ok, w, 3*ratelimit.DefaultPairInterval)
	}
	// Other recipients of the same account, and the same recipient on
	// another account, are not held back.
	if ok, _ := p.Reserve("acct", "+2"); !ok {
		t.Fatal("another recipient of the same account was refused")
	}
	if ok, _ := p.Reserve("other", "+1"); !ok {
		t.Fatal("the same recipient on another account was refused")
	}
	// Asking every second for a minute: a burst of three each time the
	// debt is repaid (at 18, 36 and 54 s), one per 6 s on average.
	var at []int
	for sec := 1; sec <= 60; sec++ {
		clk.Advance(time.Second)
		if ok, _ := p.Reserve("acct", "+1"); ok {
			at = append(at, sec)
		}
	}
	if want := []int{18, 19, 20, 36, 37, 38, 54, 55, 56}; !slices.Equal(at, want) {
		t.Fatalf("sends after the burst at seconds %v, want %v", at, want)
	}
}

// TestPairBurstBorrowsFutureQuota: Meta's pair limit lets a quiet pair
// burst but charges every message one interval (reference §3: "a burst of
// 20 means ~2 min before the next send"). A token bucket would grant the
// 4th message of a burst of 3 after one interval, which the provider
// answers with 131056.
func TestPairBurstBorrowsFutureQuota(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New()
	p := newPairs(t, clk, 6*time.Second, 20)
	for i := range 20 {
		if ok, w := p.Reserve("a", "r"); !ok {
			t.Fatalf("send %d of a burst of 20 refused, wait %v", i+1, w)
		}
	}
	clk.Advance(7 * time.Second)
	if ok, w := p.Reserve("a", "r"); ok || w != 113*time.Second {
		t.Fatalf("7 s after a burst of 20: ok=%v wait=%v, want refused until 120 s after it began", ok, w)
	}
	clk.Advance(113 * time.Second)
	if ok, w := p.Reserve("a", "r"); !ok {
		t.Fatalf("send once the burst is repaid refused, wait %v", w)
	}
}

// TestPairBurstWithinOneInterval: a burst is what a quiet pair sends
// within one interval of its first message; a pair that sent once and
// comes back later, while still owing, waits until the debt is repaid.
func TestPairBurstWithinOneInterval(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New()
	p := newPairs(t, clk, 6*time.Second, 3)
	p.Take("a", "r")
	clk.Advance(5 * time.Second)
	if ok, w := p.Reserve("a", "r"); !ok {
		t.Fatalf("second message within the burst's interval refused, wait %v", w)
	}
	clk.Advance(2 * time.Second) // 7 s: the burst's interval is over, 12 s owed
	if ok, w := p.Reserve("a", "r"); ok || w != 5*time.Second {
		t.Fatalf("after the burst's interval: ok=%v wait=%v, want refused for 5s", ok, w)
	}
}

// TestPairLimitMatchesMetaRule checks the limiter against Meta's rule
// written out independently: every message borrows one interval; a pair
// owing nothing starts a burst; a burst takes at most burst messages, all
// within one interval of its first; a pair owing something outside a
// burst is refused (131056). The limiter must grant exactly what the rule
// allows: no 131056, and no budget left unused.
func TestPairLimitMatchesMetaRule(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		interval := time.Duration(rapid.IntRange(1, 10).Draw(t, "interval_s")) * time.Second
		burst := rapid.IntRange(1, 6).Draw(t, "burst")
		clk := fakeclock.New()
		p, err := ratelimit.NewPairLimiter(ratelimit.PairConfig{Clock: clk, Interval: interval, Burst: burst})
		if err != nil {
			t.Fatal(err)
		}
		var owedUntil, burstStart time.Duration // since the epoch
		burstN := 0
		now := time.Duration(0)
		for i := range rapid.IntRange(1, 60).Draw(t, "asks") {
			gap := time.Duration(rapid.IntRange(0, 4000).Draw(t, fmt.Sprintf("gap_ms_%d", i))) * time.Millisecond
			clk.Advance(gap)
			now += gap
			var allowed bool
			switch {
			case owedUntil <= now:
				allowed = true
				burstStart, burstN, owedUntil = now, 0, now
			case now-burstStart < interval && burstN < burst:
				allowed = true
			}
			ok, wait := p.Reserve("a", "r")
			if ok != allowed {
				t.Fatalf("ask %d at %v (owed until %v, burst of %d since %v): limiter %v, rule %v", i, now, owedUntil, burstN, burstStart, ok, allowed)
			}
			if ok {
				burstN++
				owedUntil += interval
				continue
			}
			// Refused, the pair can send again once its debt is repaid.
			if now+wait != owedUntil {
				t.Fatalf("ask %d at %v refused with wait %v, owed until %v", i, now, wait, owedUntil)
			}
		}
	})
}

func TestPairWaitTakesNothing(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New()
	p := newPairs(t, clk, 6*time.Second, 1)
	for range 5 {
		if w := p.Wait("a", "r"); w != 0 {
			t.Fatalf("Wait of a fresh pair = %v, want 0", w)
		}
	}
	p.Take("a", "r")
	if w := p.Wait("a", "r"); w != 6*time.Second {
		t.Fatalf("Wait after one send = %v, want 6s", w)
	}
	// An early send is recorded too: the pair is pushed further back.
	p.Take("a", "r")
	if w := p.Wait("a", "r"); w != 12*time.Second {
		t.Fatalf("Wait after an early second send = %v, want 12s", w)
	}
}

func TestPairOnPairLimited(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New()
	p := newPairs(t, clk, 6*time.Second, 3)
	p.OnPairLimited("a", "r")
	if w := p.Wait("a", "r"); w != 6*time.Second {
		t.Fatalf("Wait after 131056 on a quiet pair = %v, want a full interval 6s", w)
	}
	// A 131056 in the middle of a burst ends it.
	p.Take("b", "r")
	p.OnPairLimited("b", "r")
	if w := p.Wait("b", "r"); w != 6*time.Second {
		t.Fatalf("Wait after 131056 within a burst = %v, want 6s (the burst is over)", w)
	}
	clk.Advance(6 * time.Second)
	if ok, w := p.Reserve("a", "r"); !ok {
		t.Fatalf("send an interval after 131056 refused, wait %v", w)
	}
}

func TestPairSetPolicy(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New()
	p := newPairs(t, clk, 6*time.Second, 1)
	if err := p.SetPolicy(time.Second, 2); err != nil {
		t.Fatalf("SetPolicy: %v", err)
	}
	if iv, b := p.Policy(); iv != time.Second || b != 2 {
		t.Fatalf("Policy = %v, %d; want 1s, 2", iv, b)
	}
	for i := range 2 {
		if ok, _ := p.Reserve("a", "r"); !ok {
			t.Fatalf("send %d under burst 2 refused", i+1)
		}
	}
	if _, w := p.Reserve("a", "r"); w != 2*time.Second {
		t.Fatalf("wait under the new 1s interval after a burst of 2 = %v, want 2s", w)
	}
	for _, bad := range []struct {
		iv time.Duration
		b  int
	}{{0, 1}, {-time.Second, 1}, {time.Second, 0}} {
		if err := p.SetPolicy(bad.iv, bad.b); err == nil {
			t.Errorf("SetPolicy(%v, %d) accepted", bad.iv, bad.b)
		}
	}
}

// Idle pairs are dropped, so a stream of distinct recipients does not grow
// the map without bound; a busy pair survives the sweeps with its debt.
func TestPairMemoryBounded(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New()
	p := newPairs(t, clk, 6*time.Second, 1)
	p.Take("a", "busy")
	p.Take("a", "busy") // busy until 12 s from now
	for i := range 20_000 {
		p.Take("a", fmt.Sprintf("r%d", i))
		clk.Advance(10 * time.Millisecond) // 100 new recipients/s, each busy for 6 s
		if i == 500 {
			if w := p.Wait("a", "busy"); w <= 0 {
				t.Fatal("a busy pair was forgotten by a sweep")
			}
		}
	}
	// At most 600 pairs are busy at any time; sweeps keep the map within
	// twice that (or the minimum sweep size).
	if n := p.Len(); n > 2500 {
		t.Fatalf("pairs tracked after 20000 distinct recipients = %d, want a bounded number", n)
	}
}

// TestPairSetPolicyMidBurstKeepsBurstCount: a burst is counted in
// messages. A pair that has sent its whole burst of 3 at 6 s must not get
// more within the burst once pair_interval is raised (an operator slowing
// pairs down after 131056s): measured as debt over the new, longer
// interval, its 18 s would read as less than one message.
func TestPairSetPolicyMidBurstKeepsBurstCount(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New()
	p := newPairs(t, clk, 6*time.Second, 3)
	for i := range 3 {
		if ok, w := p.Reserve("a", "r"); !ok {
			t.Fatalf("send %d of the burst refused, wait %v", i+1, w)
		}
	}
	if err := p.SetPolicy(time.Minute, 3); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if ok, _ := p.Reserve("a", "r"); ok {
		t.Fatal("a 4th message granted in a burst of 3 after pair_interval was raised")
	}
}
