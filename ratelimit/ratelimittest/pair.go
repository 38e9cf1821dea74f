package ratelimittest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/ratelimit"
)

// NewPairs builds a fresh pair limiter with the given policy (zero: the
// defaults) that reads time from clock. Each call must return a limiter
// with no pairs in it; two limiters built for the same test by NewNode
// share theirs.
type NewPairs func(t *testing.T, clock wamux.Clock, interval time.Duration, burst int) ratelimit.Pairs

// PairOptions describe what a pair limiter implementation can do.
type PairOptions struct {
	// NewNode, when set, builds a second limiter sharing the pairs of the
	// one the last NewPairs call of the same test built (another gateway
	// node): the suite then checks that nodes pace a shared pair together.
	NewNode NewPairs
}

// RunPairs runs the pair limiter suite: Meta's pair rule (every message
// borrows one interval; a quiet pair may burst within one interval; a pair
// that owes waits until repaid), 131056 feedback, policy changes and, for
// shared implementations, two nodes on one pair.
func RunPairs(t *testing.T, newPairs NewPairs, opts PairOptions) {
	t.Run("BurstThenPace", func(t *testing.T) { testPairBurstThenPace(t, newPairs) })
	t.Run("BurstBorrowsFutureQuota", func(t *testing.T) { testPairBorrows(t, newPairs) })
	t.Run("BurstWithinOneInterval", func(t *testing.T) { testPairBurstWithinInterval(t, newPairs) })
	t.Run("MatchesMetaRule", func(t *testing.T) { testPairMetaRule(t, newPairs) })
	t.Run("WaitTakesNothing", func(t *testing.T) { testPairWaitTakesNothing(t, newPairs) })
	t.Run("OnPairLimited", func(t *testing.T) { testPairOnPairLimited(t, newPairs) })
	t.Run("SetPolicy", func(t *testing.T) { testPairSetPolicy(t, newPairs) })
	t.Run("SetPolicyMidBurstKeepsBurstCount", func(t *testing.T) { testPairSetPolicyMidBurst(t, newPairs) })
	t.Run("Concurrent", func(t *testing.T) { testPairConcurrent(t, newPairs, nil) })
	if opts.NewNode != nil {
		t.Run("NodesShareOnePair", func(t *testing.T) { testPairConcurrent(t, newPairs, opts.NewNode) })
	}
}

// pairT wraps a limiter so that an error fails the test.
type pairT struct {
	t testing.TB
	p ratelimit.Pairs
}

func (p pairT) reserve(acct, to string) (bool, time.Duration) {
	p.t.Helper()
	ok, w, err := p.p.Reserve(p.t.Context(), acct, to)
	if err != nil {
		p.t.Fatalf("Reserve(%s, %s): %v", acct, to, err)
	}
	return ok, w
}

func (p pairT) wait(acct, to string) time.Duration {
	p.t.Helper()
	w, err := p.p.Wait(p.t.Context(), acct, to)
	if err != nil {
		p.t.Fatalf("Wait(%s, %s): %v", acct, to, err)
	}
	return w
}

func (p pairT) take(acct, to string) {
	p.t.Helper()
	if err := p.p.Take(p.t.Context(), acct, to); err != nil {
		p.t.Fatalf("Take(%s, %s): %v", acct, to, err)
	}
}

func (p pairT) limited(acct, to string) {
	p.t.Helper()
	if err := p.p.OnPairLimited(p.t.Context(), acct, to); err != nil {
		p.t.Fatalf("OnPairLimited(%s, %s): %v", acct, to, err)
	}
}

func testPairBurstThenPace(t *testing.T, newPairs NewPairs) {
	clk := fakeclock.New()
	p := pairT{t, newPairs(t, clk, 0, 0)} // defaults: 6 s, burst 3
	for i := range ratelimit.DefaultPairBurst {
		if ok, w := p.reserve("acct", "+1"); !ok {
			t.Fatalf("send %d of the burst refused, wait %v", i+1, w)
		}
	}
	// The burst borrowed three intervals: nothing more for 18 s.
	if ok, w := p.reserve("acct", "+1"); ok || w != 3*ratelimit.DefaultPairInterval {
		t.Fatalf("send after the burst: ok=%v wait=%v, want refused for %v", ok, w, 3*ratelimit.DefaultPairInterval)
	}
	// Other recipients of the same account, and the same recipient on
	// another account, are not held back.
	if ok, _ := p.reserve("acct", "+2"); !ok {
		t.Fatal("another recipient of the same account was refused")
	}
	if ok, _ := p.reserve("other", "+1"); !ok {
		t.Fatal("the same recipient on another account was refused")
	}
	// Asking every second for a minute: a burst of three each time the
	// debt is repaid (at 18, 36 and 54 s), one per 6 s on average.
	var at []int
	for sec := 1; sec <= 60; sec++ {
		clk.Advance(time.Second)
		if ok, _ := p.reserve("acct", "+1"); ok {
			at = append(at, sec)
		}
	}
	if want := []int{18, 19, 20, 36, 37, 38, 54, 55, 56}; !slices.Equal(at, want) {
		t.Fatalf("sends after the burst at seconds %v, want %v", at, want)
	}
}

// testPairBorrows: Meta's pair limit lets a quiet pair burst but charges
// every message one interval (a burst of 20 at 6 s means 2 min before the
// next send). A token bucket would grant the 21st message after one
// interval, which the provider answers with 131056.
func testPairBorrows(t *testing.T, newPairs NewPairs) {
	clk := fakeclock.New()
	p := pairT{t, newPairs(t, clk, 6*time.Second, 20)}
	for i := range 20 {
		if ok, w := p.reserve("a", "r"); !ok {
			t.Fatalf("send %d of a burst of 20 refused, wait %v", i+1, w)
		}
	}
	clk.Advance(7 * time.Second)
	if ok, w := p.reserve("a", "r"); ok || w != 113*time.Second {
		t.Fatalf("7 s after a burst of 20: ok=%v wait=%v, want refused until 120 s after it began", ok, w)
	}
	clk.Advance(113 * time.Second)
	if ok, w := p.reserve("a", "r"); !ok {
		t.Fatalf("send once the burst is repaid refused, wait %v", w)
	}
}

// testPairBurstWithinInterval: a burst is what a quiet pair sends within
// one interval of its first message; a pair that sent once and comes back
// later, while still owing, waits until the debt is repaid.
func testPairBurstWithinInterval(t *testing.T, newPairs NewPairs) {
	clk := fakeclock.New()
	p := pairT{t, newPairs(t, clk, 6*time.Second, 3)}
	p.take("a", "r")
	clk.Advance(5 * time.Second)
	if ok, w := p.reserve("a", "r"); !ok {
		t.Fatalf("second message within the burst's interval refused, wait %v", w)
	}
	clk.Advance(2 * time.Second) // 7 s: the burst's interval is over, 12 s owed
	if ok, w := p.reserve("a", "r"); ok || w != 5*time.Second {
		t.Fatalf("after the burst's interval: ok=%v wait=%v, want refused for 5s", ok, w)
	}
}

// testPairMetaRule checks the limiter against Meta's rule written out
// independently: every message borrows one interval; a pair owing nothing
// starts a burst; a burst takes at most burst messages, all within one
// interval of its first; a pair owing something outside a burst is refused
// (131056). The limiter must grant exactly what the rule allows: no
// 131056, and no budget left unused.
func testPairMetaRule(t *testing.T, newPairs NewPairs) {
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		interval := time.Duration(rapid.IntRange(1, 10).Draw(rt, "interval_s")) * time.Second
		burst := rapid.IntRange(1, 6).Draw(rt, "burst")
		clk := fakeclock.New()
		p := pairT{t, newPairs(t, clk, interval, burst)}
		run++
		to := fmt.Sprint("r", run) // a pair of its own for each run
		var owedUntil, burstStart time.Duration
		burstN := 0
		now := time.Duration(0)
		for i := range rapid.IntRange(1, 60).Draw(rt, "asks") {
			gap := time.Duration(rapid.IntRange(0, 4000).Draw(rt, fmt.Sprintf("gap_ms_%d", i))) * time.Millisecond
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
			ok, wait := p.reserve("a", to)
			if ok != allowed {
				rt.Fatalf("ask %d at %v (owed until %v, burst of %d since %v): limiter %v, rule %v", i, now, owedUntil, burstN, burstStart, ok, allowed)
			}
			if ok {
				burstN++
				owedUntil += interval
				continue
			}
			if now+wait != owedUntil {
				rt.Fatalf("ask %d at %v refused with wait %v, owed until %v", i, now, wait, owedUntil)
			}
		}
	})
}

func testPairWaitTakesNothing(t *testing.T, newPairs NewPairs) {
	clk := fakeclock.New()
	p := pairT{t, newPairs(t, clk, 6*time.Second, 1)}
	for range 5 {
		if w := p.wait("a", "r"); w != 0 {
			t.Fatalf("Wait of a fresh pair = %v, want 0", w)
		}
	}
	p.take("a", "r")
	if w := p.wait("a", "r"); w != 6*time.Second {
		t.Fatalf("Wait after one send = %v, want 6s", w)
	}
	// An early send is recorded too: the pair is pushed further back.
	p.take("a", "r")
	if w := p.wait("a", "r"); w != 12*time.Second {
		t.Fatalf("Wait after an early second send = %v, want 12s", w)
	}
}

func testPairOnPairLimited(t *testing.T, newPairs NewPairs) {
	clk := fakeclock.New()
	p := pairT{t, newPairs(t, clk, 6*time.Second, 3)}
	p.limited("a", "r")
	if w := p.wait("a", "r"); w != 6*time.Second {
		t.Fatalf("Wait after 131056 on a quiet pair = %v, want a full interval 6s", w)
	}
	// A 131056 in the middle of a burst ends it.
	p.take("b", "r")
	p.limited("b", "r")
	if w := p.wait("b", "r"); w != 6*time.Second {
		t.Fatalf("Wait after 131056 within a burst = %v, want 6s (the burst is over)", w)
	}
	// A 131056 never shortens what a pair owes.
	for range 3 {
		p.take("c", "r")
	}
	p.limited("c", "r")
	if w := p.wait("c", "r"); w != 18*time.Second {
		t.Fatalf("Wait after 131056 on a pair owing 18s = %v, want 18s", w)
	}
	clk.Advance(6 * time.Second)
	if ok, w := p.reserve("a", "r"); !ok {
		t.Fatalf("send an interval after 131056 refused, wait %v", w)
	}
}

func testPairSetPolicy(t *testing.T, newPairs NewPairs) {
	clk := fakeclock.New()
	p := pairT{t, newPairs(t, clk, 6*time.Second, 1)}
	if err := p.p.SetPolicy(time.Second, 2); err != nil {
		t.Fatalf("SetPolicy: %v", err)
	}
	if iv, b := p.p.Policy(); iv != time.Second || b != 2 {
		t.Fatalf("Policy = %v, %d; want 1s, 2", iv, b)
	}
	for i := range 2 {
		if ok, _ := p.reserve("a", "r"); !ok {
			t.Fatalf("send %d under burst 2 refused", i+1)
		}
	}
	if _, w := p.reserve("a", "r"); w != 2*time.Second {
		t.Fatalf("wait under the new 1s interval after a burst of 2 = %v, want 2s", w)
	}
	for _, bad := range []struct {
		iv time.Duration
		b  int
	}{{0, 1}, {-time.Second, 1}, {time.Second, 0}, {2 * time.Hour, 1}, {time.Second, 1001}} {
		if err := p.p.SetPolicy(bad.iv, bad.b); err == nil {
			t.Errorf("SetPolicy(%v, %d) accepted", bad.iv, bad.b)
		}
	}
	if iv, b := p.p.Policy(); iv != time.Second || b != 2 {
		t.Fatalf("Policy after refused changes = %v, %d; want 1s, 2", iv, b)
	}
}

// testPairSetPolicyMidBurst: a burst is counted in messages. A pair that
// has sent its whole burst of 3 at 6 s must not get more within the burst
// once the interval is raised: measured as debt over the new, longer
// interval, its 18 s would read as less than one message.
func testPairSetPolicyMidBurst(t *testing.T, newPairs NewPairs) {
	clk := fakeclock.New()
	p := pairT{t, newPairs(t, clk, 6*time.Second, 3)}
	for i := range 3 {
		if ok, w := p.reserve("a", "r"); !ok {
			t.Fatalf("send %d of the burst refused, wait %v", i+1, w)
		}
	}
	if err := p.p.SetPolicy(time.Minute, 3); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if ok, _ := p.reserve("a", "r"); ok {
		t.Fatal("a 4th message granted in a burst of 3 after the interval was raised")
	}
}

// testPairConcurrent: callers racing on one pair, half of them through a
// limiter built by second (another node's; nil: the same limiter), get
// exactly the burst while no time passes, and nothing more until it is
// repaid.
func testPairConcurrent(t *testing.T, first, second NewPairs) {
	clk := fakeclock.New()
	nodes := []ratelimit.Pairs{first(t, clk, 6*time.Second, 3)}
	if second != nil {
		nodes = append(nodes, second(t, clk, 6*time.Second, 3))
	} else {
		nodes = append(nodes, nodes[0])
	}
	count := func() int {
		var mu sync.Mutex
		granted := 0
		var wg sync.WaitGroup
		for i := range 8 {
			p := pairT{t, nodes[i%2]}
			wg.Go(func() {
				for range 5 {
					ok, _, err := p.p.Reserve(t.Context(), "a", "r")
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						mu.Lock()
						granted++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		return granted
	}
	if n := count(); n != 3 {
		t.Fatalf("40 concurrent asks of a quiet pair with burst 3: %d granted, want 3", n)
	}
	for i := range 2 {
		clk.Advance(6 * time.Second)
		if n := count(); n != 0 {
			t.Fatalf("%d×6 s after a burst of 3 (18 s owed): %d granted, want 0", i+1, n)
		}
	}
	clk.Advance(6 * time.Second)
	if n := count(); n != 3 {
		t.Fatalf("once the burst is repaid: %d granted, want a new burst of 3", n)
	}
}
