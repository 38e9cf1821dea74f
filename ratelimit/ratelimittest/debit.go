package ratelimittest

import (
	"errors"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/ratelimit"
)

func mustDebit(t *testing.T, l ratelimit.Limiter, acct string, n int) {
	t.Helper()
	if err := l.Debit(t.Context(), acct, n); err != nil {
		t.Fatalf("Debit(%s, %d): %v", acct, n, err)
	}
}

// near reports whether d is within a millisecond above want (waits are
// rounded up, never down).
func near(d, want time.Duration) bool {
	return d >= want && d <= want+time.Millisecond
}

// testDebit checks that a debit takes tokens like a grant would, and goes
// below zero so that the next sends wait for the debt to be refilled.
func testDebit(t *testing.T, newLimiter NewLimiter) {
	clk := fakeclock.New()
	l := newLimiter(t, clk)
	mustSetLimit(t, l, "a", 10, 5)
	mustDebit(t, l, "a", 2)
	if tok, err := l.Tokens(t.Context(), "a"); err != nil || math.Abs(tok-3) > 0.01 {
		t.Fatalf("Tokens after debiting 2 of 5 = %v, %v; want 3", tok, err)
	}
	if got, wait := drain(t, l, "a"); got != 3 || !near(wait, 100*time.Millisecond) {
		t.Fatalf("after debiting 2 of 5: %d grants, wait %v; want 3 grants, wait 100ms", got, wait)
	}

	// 8 from a full bucket of 5 leaves it 3 below zero: the next token
	// is 4 tokens' refill away.
	mustSetLimit(t, l, "b", 10, 5)
	mustDebit(t, l, "b", 8)
	if tok, err := l.Tokens(t.Context(), "b"); err != nil || tok != 0 {
		t.Fatalf("Tokens of a bucket in debt = %v, %v; want 0", tok, err)
	}
	ok, wait, err := l.Reserve(t.Context(), "b", 1)
	if err != nil || ok || !near(wait, 400*time.Millisecond) {
		t.Fatalf("Reserve 3 tokens below zero at 10/s: ok=%v wait=%v err=%v; want refused, wait 400ms", ok, wait, err)
	}
	clk.Advance(wait)
	if ok, wait, err := l.Reserve(t.Context(), "b", 1); err != nil || !ok {
		t.Fatalf("Reserve after the debt was refilled: ok=%v wait=%v err=%v; want granted", ok, wait, err)
	}

	// The debt survives a change of limit, in tokens: 5 below zero at
	// 20/s is 6 tokens' refill, 300ms.
	mustSetLimit(t, l, "c", 10, 5)
	mustDebit(t, l, "c", 10)
	mustSetLimit(t, l, "c", 20, 5)
	if _, wait, err := l.Reserve(t.Context(), "c", 1); err != nil || !near(wait, 300*time.Millisecond) {
		t.Fatalf("Reserve 5 below zero after raising to 20/s: wait=%v err=%v; want 300ms", wait, err)
	}

	if err := l.Debit(t.Context(), "a", 0); !errors.Is(err, ratelimit.ErrInvalidCount) {
		t.Errorf("Debit(0) error = %v, want ErrInvalidCount", err)
	}
}

// testDebitBounded checks that no amount of debits delays the next send by
// more than MaxDebt beyond the refill of its own tokens.
func testDebitBounded(t *testing.T, newLimiter NewLimiter) {
	for _, tc := range []struct {
		rate  float64
		burst int
	}{{10, 5}, {80, 8}, {1000, 50}, {0.5, 1}} {
		clk := fakeclock.New()
		l := newLimiter(t, clk)
		mustSetLimit(t, l, "a", tc.rate, tc.burst)
		mustDebit(t, l, "a", ratelimit.MaxBurst)
		for range 100 {
			mustDebit(t, l, "a", tc.burst)
		}
		most := ratelimit.MaxDebt + time.Duration(float64(time.Second)/tc.rate) + time.Millisecond
		ok, wait, err := l.Reserve(t.Context(), "a", 1)
		if err != nil || ok || wait > most || wait < ratelimit.MaxDebt {
			t.Fatalf("rate %v burst %d, Reserve after a flood of debits: ok=%v wait=%v err=%v; want refused, wait in [%v, %v]",
				tc.rate, tc.burst, ok, wait, err, ratelimit.MaxDebt, most)
		}
		clk.Advance(wait)
		if ok, wait, err := l.Reserve(t.Context(), "a", 1); err != nil || !ok {
			t.Fatalf("rate %v burst %d, Reserve after waiting out the debt: ok=%v wait=%v err=%v; want granted", tc.rate, tc.burst, ok, wait, err)
		}

		// A lower rate does not stretch the debt past the bound either.
		mustDebit(t, l, "a", ratelimit.MaxBurst)
		lower := tc.rate / 10
		mustSetLimit(t, l, "a", lower, tc.burst)
		most = ratelimit.MaxDebt + time.Duration(float64(time.Second)/lower) + time.Millisecond
		if _, wait, err := l.Reserve(t.Context(), "a", 1); err != nil || wait > most {
			t.Fatalf("rate %v lowered to %v after a flood of debits: wait=%v err=%v; want at most %v", tc.rate, lower, wait, err, most)
		}
	}
}

// testDebitCounts drives random grants, debits and clock moves, and checks
// that grants and debits together stay within rate×T + burst in every
// window that ends with a grant: what we send plus what was charged never
// exceeds the limit. Debits are kept small enough that the debt bound
// never forgives any of them.
func testDebitCounts(t *testing.T, newLimiter NewLimiter) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := t.Context()
		clk := fakeclock.New()
		l := newLimiter(t, clk)
		const acct = "debit"
		rate := rapid.Float64Range(1, 300).Draw(rt, "rate")
		burst := rapid.IntRange(1, 20).Draw(rt, "burst")
		if err := l.SetLimit(ctx, acct, rate, burst); err != nil {
			rt.Fatalf("SetLimit: %v", err)
		}
		type event struct {
			grant
			debit bool
		}
		var events []event
		for range rapid.IntRange(1, 200).Draw(rt, "steps") {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0, 1:
				iv := time.Duration(float64(time.Second) / rate)
				clk.Advance(time.Duration(rapid.Int64Range(0, int64(2*iv)).Draw(rt, "dt")))
			case 2, 3:
				// With tokens left and n at most a second's rate, the
				// bucket stays within MaxDebt of zero.
				n := rapid.IntRange(1, max(1, min(burst, int(rate)))).Draw(rt, "debit")
				tok, err := l.Tokens(ctx, acct)
				if err != nil {
					rt.Fatalf("Tokens: %v", err)
				}
				if tok <= 0 {
					continue
				}
				if err := l.Debit(ctx, acct, n); err != nil {
					rt.Fatalf("Debit(%d): %v", n, err)
				}
				events = append(events, event{grant: grant{at: clk.Now(), n: n}, debit: true})
			default:
				n := rapid.IntRange(1, burst).Draw(rt, "n")
				ok, _, err := l.Reserve(ctx, acct, n)
				if err != nil {
					rt.Fatalf("Reserve(%d): %v", n, err)
				}
				if ok {
					events = append(events, event{grant: grant{at: clk.Now(), n: n}})
				}
			}
		}
		for i := range events {
			sum := 0
			for j := i; j < len(events); j++ {
				sum += events[j].n
				if events[j].debit {
					continue
				}
				limit := rate*events[j].at.Sub(events[i].at).Seconds() + float64(burst)
				if float64(sum) > limit+tolerance {
					rt.Fatalf("%d grants and debits in [%v, %v], the last a grant; bound rate×T+burst is %.6f",
						sum, events[i].at.Sub(fakeclock.Epoch), events[j].at.Sub(fakeclock.Epoch), limit)
				}
			}
		}
	})
}
