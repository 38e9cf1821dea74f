package ratelimit_test

import (
	"testing"
	"time"

	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/ratelimit"
)

// TestClockJumps: a clock going backwards never hands out tokens (the
// bucket stays as it was until the clock catches up) and a clock jumping
// far ahead fills the bucket to its burst, no more, and ends a climb and
// a cooldown; tokens are never negative and the effective rate never
// above the configured one.
func TestClockJumps(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clk := fakeclock.New()
	a := newAdaptive(t, clk, ratelimit.AdaptiveConfig{})
	if err := a.SetLimit(ctx, "a", 10, 5); err != nil {
		t.Fatal(err)
	}
	drain := func() int {
		n := 0
		for {
			ok, _, err := a.Reserve(ctx, "a", 1)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return n
			}
			n++
		}
	}
	if n := drain(); n != 5 {
		t.Fatalf("a full bucket granted %d, want the burst 5", n)
	}
	clk.Advance(-time.Hour)
	if n := drain(); n != 0 {
		t.Fatalf("after the clock went back an hour %d granted, want none", n)
	}
	if tok, _ := a.Tokens(ctx, "a"); tok != 0 {
		t.Fatalf("tokens after the clock went back: %v", tok)
	}
	a.OnThrottled("a")
	if l := a.Limit("a"); l.EffectiveRate > l.Rate {
		t.Fatalf("effective rate %v above the configured %v", l.EffectiveRate, l.Rate)
	}
	clk.Advance(100 * 365 * 24 * time.Hour)
	if tok, _ := a.Tokens(ctx, "a"); tok != 5 {
		t.Fatalf("tokens a century later: %v, want the burst 5", tok)
	}
	if l := a.Limit("a"); l.EffectiveRate != l.Rate {
		t.Fatalf("a century after a throttle the effective rate is %v of %v", l.EffectiveRate, l.Rate)
	}
	if n := drain(); n != 5 {
		t.Fatalf("a century later %d granted, want the burst 5", n)
	}
	// Three throttles start a cooldown; the clock then goes back: still
	// cooling down, and a jump far ahead ends it.
	for range 3 {
		a.OnThrottled("a")
		clk.Advance(2 * time.Second)
	}
	clk.Advance(-time.Hour)
	if ok, _, _ := a.Reserve(ctx, "a", 1); ok {
		t.Fatal("granted during a cooldown after the clock went back")
	}
	clk.Advance(24 * time.Hour)
	if ok, _, _ := a.Reserve(ctx, "a", 1); !ok {
		t.Fatal("nothing granted a day after the cooldown")
	}
}
