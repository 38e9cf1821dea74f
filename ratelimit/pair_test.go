package ratelimit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/ratelimit/ratelimittest"
)

func newPairs(t *testing.T, clk wamux.Clock, interval time.Duration, burst int) *ratelimit.PairLimiter {
	t.Helper()
	p, err := ratelimit.NewPairLimiter(ratelimit.PairConfig{Clock: clk, Interval: interval, Burst: burst})
	if err != nil {
		t.Fatalf("NewPairLimiter: %v", err)
	}
	return p
}

func TestPairConformance(t *testing.T) {
	t.Parallel()
	ratelimittest.RunPairs(t, func(t *testing.T, clk wamux.Clock, interval time.Duration, burst int) ratelimit.Pairs {
		return newPairs(t, clk, interval, burst)
	}, ratelimittest.PairOptions{})
}

// Idle pairs are dropped, so a stream of distinct recipients does not grow
// the map without bound; a busy pair survives the sweeps with its debt.
func TestPairMemoryBounded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clk := fakeclock.New()
	p := newPairs(t, clk, 6*time.Second, 1)
	_ = p.Take(ctx, "a", "busy")
	_ = p.Take(ctx, "a", "busy") // busy until 12 s from now
	for i := range 20_000 {
		_ = p.Take(ctx, "a", fmt.Sprintf("r%d", i))
		clk.Advance(10 * time.Millisecond) // 100 new recipients/s, each busy for 6 s
		if i == 500 {
			if w, _ := p.Wait(ctx, "a", "busy"); w <= 0 {
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
