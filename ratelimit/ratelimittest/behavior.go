package ratelimittest

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/ratelimit"
)

func mustSetLimit(t *testing.T, l ratelimit.Limiter, acct string, rate float64, burst int) {
	t.Helper()
	if err := l.SetLimit(t.Context(), acct, rate, burst); err != nil {
		t.Fatalf("SetLimit(%s, %v, %d): %v", acct, rate, burst, err)
	}
}

// drain takes single tokens until refused and returns how many it got and
// the wait of the refusal.
func drain(t *testing.T, l ratelimit.Limiter, acct string) (int, time.Duration) {
	t.Helper()
	for got := 0; ; got++ {
		ok, wait, err := l.Reserve(t.Context(), acct, 1)
		if err != nil {
			t.Fatalf("Reserve(%s): %v", acct, err)
		}
		if !ok {
			return got, wait
		}
		if got > 1_000_000 {
			t.Fatalf("Reserve(%s) never refuses", acct)
		}
	}
}

// testUtilization checks that a limiter under excess demand grants close to
// the whole budget, both for a caller that follows the waits it is given
// and for one that polls on a fixed tick.
func testUtilization(t *testing.T, newLimiter NewLimiter, window time.Duration) {
	for _, tc := range []struct {
		rate  float64
		burst int
	}{{1, 1}, {7, 3}, {80, 8}, {1000, 50}} {
		want := tc.rate * window.Seconds()

		clk := fakeclock.New()
		l := newLimiter(t, clk)
		mustSetLimit(t, l, "follow", tc.rate, tc.burst)
		end := clk.Now().Add(window)
		granted := 0
		for !clk.Now().After(end) {
			n, wait := drain(t, l, "follow")
			granted += n
			clk.Advance(wait)
		}
		if float64(granted) < 0.99*want || float64(granted) > want+float64(tc.burst)+tolerance {
			t.Errorf("rate %v burst %d, caller following waits: %d grants in %v, want about %v", tc.rate, tc.burst, granted, window, want)
		}

		clk = fakeclock.New()
		l = newLimiter(t, clk)
		mustSetLimit(t, l, "poll", tc.rate, tc.burst)
		end = clk.Now().Add(window)
		granted = 0
		for tick := 10 * time.Millisecond; !clk.Now().After(end); clk.Advance(tick) {
			n, _ := drain(t, l, "poll")
			granted += n
		}
		if float64(granted) < 0.99*want || float64(granted) > want+float64(tc.burst)+tolerance {
			t.Errorf("rate %v burst %d, caller polling: %d grants in %v, want about %v", tc.rate, tc.burst, granted, window, want)
		}
	}
}

// testSetLimitLowers checks that a lower limit caps the very next grants:
// the bucket shrinks to the new burst and refills at the new rate.
func testSetLimitLowers(t *testing.T, newLimiter NewLimiter) {
	clk := fakeclock.New()
	l := newLimiter(t, clk)
	mustSetLimit(t, l, "a", 100, 50)
	mustSetLimit(t, l, "a", 1, 2)
	if tok, err := l.Tokens(t.Context(), "a"); err != nil || tok > 2+tolerance {
		t.Fatalf("Tokens after lowering burst to 2 = %v, %v; want ≤ 2", tok, err)
	}
	got, wait := drain(t, l, "a")
	if got != 2 {
		t.Fatalf("grants after lowering to burst 2 = %d, want 2", got)
	}
	if wait < 900*time.Millisecond || wait > time.Second+time.Millisecond {
		t.Fatalf("wait after lowering rate to 1/s = %v, want about 1s", wait)
	}
}

// testSetLimitRaises checks that a higher rate shortens a pending wait at
// once.
func testSetLimitRaises(t *testing.T, newLimiter NewLimiter) {
	clk := fakeclock.New()
	l := newLimiter(t, clk)
	mustSetLimit(t, l, "a", 1, 1)
	if got, wait := drain(t, l, "a"); got != 1 || wait < 900*time.Millisecond {
		t.Fatalf("drain at 1/s burst 1: %d grants, wait %v; want 1 grant, wait about 1s", got, wait)
	}
	mustSetLimit(t, l, "a", 100, 1)
	_, wait, err := l.Reserve(t.Context(), "a", 1)
	if err != nil || wait > 11*time.Millisecond {
		t.Fatalf("wait after raising to 100/s = %v, %v; want ≤ 10ms", wait, err)
	}
	clk.Advance(10 * time.Millisecond)
	if ok, wait, err := l.Reserve(t.Context(), "a", 1); err != nil || !ok {
		t.Fatalf("Reserve 10ms after raising to 100/s: ok=%v wait=%v err=%v, want granted", ok, wait, err)
	}
}

// testLargerBurst checks that a larger burst is no gift of tokens: it
// fills at the rate, so a limit change never lets more than rate×T + burst
// through.
func testLargerBurst(t *testing.T, newLimiter NewLimiter) {
	clk := fakeclock.New()
	l := newLimiter(t, clk)
	mustSetLimit(t, l, "a", 10, 1)
	if got, _ := drain(t, l, "a"); got != 1 {
		t.Fatalf("drain at burst 1: %d grants, want 1", got)
	}
	mustSetLimit(t, l, "a", 10, 10)
	if got, _ := drain(t, l, "a"); got != 0 {
		t.Fatalf("grants right after raising burst of an empty bucket = %d, want 0", got)
	}
	clk.Advance(time.Second)
	if got, _ := drain(t, l, "a"); got != 10 {
		t.Fatalf("grants 1s after raising burst to 10 at 10/s = %d, want 10", got)
	}
}

// testTokens checks the dashboard's view of the bucket.
func testTokens(t *testing.T, newLimiter NewLimiter) {
	clk := fakeclock.New()
	l := newLimiter(t, clk)
	mustSetLimit(t, l, "a", 10, 5)
	check := func(want float64, when string) {
		t.Helper()
		got, err := l.Tokens(t.Context(), "a")
		if err != nil || math.Abs(got-want) > 0.01 {
			t.Fatalf("Tokens %s = %v, %v; want %v", when, got, err, want)
		}
	}
	check(5, "of a new bucket")
	if ok, _, err := l.Reserve(t.Context(), "a", 2); err != nil || !ok {
		t.Fatalf("Reserve(2) of a full bucket: ok=%v err=%v", ok, err)
	}
	check(3, "after taking 2")
	clk.Advance(100 * time.Millisecond)
	check(4, "100ms later at 10/s")
	clk.Advance(time.Hour)
	check(5, "after a long idle time")
}

// testIndependent checks that one account's use leaves another's bucket
// and waits untouched.
func testIndependent(t *testing.T, newLimiter NewLimiter) {
	clk := fakeclock.New()
	l := newLimiter(t, clk)
	mustSetLimit(t, l, "a", 1, 1)
	mustSetLimit(t, l, "b", 2, 3)
	_, waitA := drain(t, l, "a")
	if got, _ := drain(t, l, "b"); got != 3 {
		t.Fatalf("b granted %d after a was drained, want its burst 3", got)
	}
	if _, wait := drain(t, l, "a"); wait != waitA {
		t.Fatalf("a's wait changed from %v to %v when b was drained", waitA, wait)
	}
	clk.Advance(500 * time.Millisecond)
	if got, _ := drain(t, l, "b"); got != 1 {
		t.Fatalf("b granted %d 500ms later at 2/s, want 1", got)
	}
	if got, _ := drain(t, l, "a"); got != 0 {
		t.Fatalf("a granted %d 500ms after being drained at 1/s, want 0", got)
	}
}

// testConcurrent hammers several accounts from many goroutines while the
// clock moves, and checks each account's total against the bound.
func testConcurrent(t *testing.T, newLimiter NewLimiter) {
	const (
		rate     = 1000.0
		burst    = 10
		workers  = 8
		calls    = 400
		ticks    = 100
		tick     = time.Millisecond
		accounts = 3
	)
	clk := fakeclock.New()
	l := newLimiter(t, clk)
	names := []string{"c0", "c1", "c2"}
	for _, a := range names {
		mustSetLimit(t, l, a, rate, burst)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted = map[string]int{}
		errs    []error
	)
	ctx := context.WithoutCancel(t.Context())
	for w := range workers {
		wg.Go(func() {
			local := map[string]int{}
			for i := range calls {
				a := names[(w+i)%accounts]
				ok, _, err := l.Reserve(ctx, a, 1)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				if ok {
					local[a]++
				}
			}
			mu.Lock()
			for a, n := range local {
				granted[a] += n
			}
			mu.Unlock()
		})
	}
	wg.Go(func() {
		for range ticks {
			clk.Advance(tick)
		}
	})
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("Reserve under concurrency: %v", errors.Join(errs...))
	}
	bound := burst + rate*(ticks*tick).Seconds()
	for _, a := range names {
		if float64(granted[a]) > bound+tolerance {
			t.Errorf("account %s: %d grants in %v with concurrent callers, bound %v", a, granted[a], ticks*tick, bound)
		}
		if granted[a] < burst {
			t.Errorf("account %s: %d grants, want at least the burst %d", a, granted[a], burst)
		}
	}
}

// testErrors checks the refusals a caller must handle as bugs, not waits.
func testErrors(t *testing.T, newLimiter NewLimiter) {
	ctx := t.Context()
	l := newLimiter(t, fakeclock.New())
	mustSetLimit(t, l, "a", 10, 5)
	if _, _, err := l.Reserve(ctx, "a", 0); !errors.Is(err, ratelimit.ErrInvalidCount) {
		t.Errorf("Reserve(0) error = %v, want ErrInvalidCount", err)
	}
	if _, _, err := l.Reserve(ctx, "a", 6); !errors.Is(err, ratelimit.ErrExceedsBurst) {
		t.Errorf("Reserve(6) with burst 5 error = %v, want ErrExceedsBurst", err)
	}
	for _, tc := range []struct {
		rate  float64
		burst int
	}{{0, 1}, {-1, 1}, {math.NaN(), 1}, {math.Inf(1), 1}, {1, 0}, {1, -3}} {
		if err := l.SetLimit(ctx, "a", tc.rate, tc.burst); !errors.Is(err, ratelimit.ErrInvalidLimit) {
			t.Errorf("SetLimit(%v, %d) error = %v, want ErrInvalidLimit", tc.rate, tc.burst, err)
		}
	}
	if got, _ := drain(t, l, "a"); got != 5 {
		t.Errorf("after rejected SetLimits the bucket granted %d, want the old burst 5", got)
	}
}
