package ratelimit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/ratelimit/ratelimittest"
)

func newPairs(t *testing.T, clk ratelimit.Clock, interval time.Duration, burst int) *ratelimit.PairLimiter {
	t.Helper()
	p, err := ratelimit.NewPairLimiter(ratelimit.PairConfig{Clock: clk, Interval: interval, Burst: burst})
	if err != nil {
		t.Fatalf("NewPairLimiter: %v", err)
	}
	return p
}

func TestPairBurstThenPace(t *testing.T) {
	t.Parallel()
	clk := ratelimittest.NewClock()
	p := newPairs(t, clk, 0, 0) // defaults: 6 s, burst 3
	for i := range ratelimit.DefaultPairBurst {
		if ok, w := p.Reserve("acct", "+1"); !ok {
			t.Fatalf("send %d of the burst refused, wait %v", i+1, w)
		}
	}
	if ok, w := p.Reserve("acct", "+1"); ok || w != ratelimit.DefaultPairInterval {
		t.Fatalf("send after the burst: ok=%v wait=%v, want refused for %v", ok, w, ratelimit.DefaultPairInterval)
	}
	// Other recipients of the same account, and the same recipient on
	// another account, are not held back.
	if ok, _ := p.Reserve("acct", "+2"); !ok {
		t.Fatal("another recipient of the same account was refused")
	}
	if ok, _ := p.Reserve("other", "+1"); !ok {
		t.Fatal("the same recipient on another account was refused")
	}
	// Steady state: one per interval, tested every second for a minute.
	sent := 0
	for range 60 {
		clk.Advance(time.Second)
		if ok, _ := p.Reserve("acct", "+1"); ok {
			sent++
		}
	}
	if sent != 10 {
		t.Fatalf("sends in 60 s after the burst = %d, want 10 (one per 6 s)", sent)
	}
}

func TestPairWaitTakesNothing(t *testing.T) {
	t.Parallel()
	clk := ratelimittest.NewClock()
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
	clk := ratelimittest.NewClock()
	p := newPairs(t, clk, 6*time.Second, 3)
	p.OnPairLimited("a", "r")
	if w := p.Wait("a", "r"); w != 6*time.Second {
		t.Fatalf("Wait after 131056 on a quiet pair = %v, want a full interval 6s", w)
	}
	clk.Advance(6 * time.Second)
	if ok, w := p.Reserve("a", "r"); !ok {
		t.Fatalf("send an interval after 131056 refused, wait %v", w)
	}
	if ok, _ := p.Reserve("a", "r"); ok {
		t.Fatal("a second send right after was granted: the burst should still be used up")
	}
}

func TestPairSetPolicy(t *testing.T) {
	t.Parallel()
	clk := ratelimittest.NewClock()
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
	if _, w := p.Reserve("a", "r"); w != time.Second {
		t.Fatalf("wait under the new 1s interval = %v, want 1s", w)
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
	clk := ratelimittest.NewClock()
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
