package ratelimittest

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/wamux/wamux/internal/fakeclock"
)

// tolerance absorbs float rounding in the check itself; a limiter that
// grants one token too many exceeds it by a whole token.
const tolerance = 1e-6

type grant struct {
	at time.Time
	n  int
}

// segment is a stretch of time with one configured limit.
type segment struct {
	from  time.Time
	rate  float64
	burst int
}

// allowance is the most grants guarantee 6 permits in [a, b]: the largest
// bucket that existed up to b plus what the configured rates refill over
// the window.
func allowance(segs []segment, a, b time.Time) float64 {
	maxBurst := 0
	total := 0.0
	for i, s := range segs {
		if s.from.After(b) {
			break
		}
		maxBurst = max(maxBurst, s.burst)
		end := b
		if i+1 < len(segs) && segs[i+1].from.Before(b) {
			end = segs[i+1].from
		}
		start := s.from
		if start.Before(a) {
			start = a
		}
		if end.After(start) {
			total += s.rate * end.Sub(start).Seconds()
		}
	}
	return float64(maxBurst) + total
}

// testBound drives a random schedule of requests, clock moves and limit
// changes, and checks every window between two grants against the bound.
func testBound(t *testing.T, newLimiter NewLimiter) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := t.Context()
		clk := fakeclock.New()
		l := newLimiter(t, clk)
		const acct = "bound"

		newLimit := func() (float64, int) {
			return rapid.Float64Range(0.5, 300).Draw(rt, "rate"), rapid.IntRange(1, 20).Draw(rt, "burst")
		}
		rate, burst := newLimit()
		if err := l.SetLimit(ctx, acct, rate, burst); err != nil {
			rt.Fatalf("SetLimit: %v", err)
		}
		segs := []segment{{from: clk.Now(), rate: rate, burst: burst}}
		var grants []grant

		steps := rapid.IntRange(1, 200).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1, 2:
				iv := time.Duration(float64(time.Second) / rate)
				clk.Advance(time.Duration(rapid.Int64Range(0, int64(2*iv)).Draw(rt, "dt")))
			case 3:
				rate, burst = newLimit()
				if err := l.SetLimit(ctx, acct, rate, burst); err != nil {
					rt.Fatalf("SetLimit: %v", err)
				}
				segs = append(segs, segment{from: clk.Now(), rate: rate, burst: burst})
			default:
				n := rapid.IntRange(1, burst).Draw(rt, "n")
				ok, wait, err := l.Reserve(ctx, acct, n)
				if err != nil {
					rt.Fatalf("Reserve(%d): %v", n, err)
				}
				if ok {
					grants = append(grants, grant{at: clk.Now(), n: n})
				} else if wait <= 0 {
					rt.Fatalf("Reserve(%d) refused with wait %v, want > 0", n, wait)
				}
			}
		}

		for i := range grants {
			sum := 0
			for j := i; j < len(grants); j++ {
				sum += grants[j].n
				limit := allowance(segs, grants[i].at, grants[j].at)
				if float64(sum) > limit+tolerance {
					rt.Fatalf("%d grants in [%v, %v] (%v), bound rate×T+burst is %.6f",
						sum, grants[i].at.Sub(fakeclock.Epoch), grants[j].at.Sub(fakeclock.Epoch), grants[j].at.Sub(grants[i].at), limit)
				}
			}
		}
	})
}

// testWaitIsHonest checks that a refusal's wait is neither too short (the
// retry after it succeeds) nor too long (no more than n tokens' refill).
func testWaitIsHonest(t *testing.T, newLimiter NewLimiter) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := t.Context()
		clk := fakeclock.New()
		l := newLimiter(t, clk)
		const acct = "wait"
		rate := rapid.Float64Range(0.5, 1000).Draw(rt, "rate")
		burst := rapid.IntRange(1, 20).Draw(rt, "burst")
		if err := l.SetLimit(ctx, acct, rate, burst); err != nil {
			rt.Fatalf("SetLimit: %v", err)
		}
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			n := rapid.IntRange(1, burst).Draw(rt, "n")
			ok, wait, err := l.Reserve(ctx, acct, n)
			if err != nil {
				rt.Fatalf("Reserve: %v", err)
			}
			if ok {
				if rapid.Bool().Draw(rt, "advance") {
					clk.Advance(time.Duration(rapid.Int64Range(0, int64(time.Second)).Draw(rt, "dt")))
				}
				continue
			}
			most := time.Duration(float64(n)/rate*float64(time.Second)) + time.Millisecond
			if wait <= 0 || wait > most {
				rt.Fatalf("Reserve(%d) at rate %v: wait %v, want in (0, %v]", n, rate, wait, most)
			}
			clk.Advance(wait)
			ok, wait2, err := l.Reserve(ctx, acct, n)
			if err != nil || !ok {
				rt.Fatalf("Reserve(%d) after waiting %v: ok=%v wait=%v err=%v, want granted", n, wait, ok, wait2, err)
			}
		}
	})
}
