package ratelimit

import (
	"fmt"
	"math"
	"time"
)

// gcra is a token bucket kept as a theoretical arrival time (the generic
// cell rate algorithm). It is the same bucket as "tokens + last refill", but
// its state is one instant and every check is integer arithmetic on
// nanoseconds, so no float rounding can ever grant a fraction of a token
// too many. The emission interval is rounded up, which errs on the side of
// sending slightly below the configured rate, never above it.
type gcra struct {
	interval time.Duration // time one token takes to refill
	burst    int
	// tat is when the bucket will be full again; a tat at or before now
	// means it is full. The zero value is a full bucket.
	tat time.Time
}

// intervalFor converts a rate in tokens per second to the emission interval.
func intervalFor(rate float64) time.Duration {
	iv := math.Ceil(float64(time.Second) / rate)
	if iv < 1 {
		iv = 1
	}
	return time.Duration(iv)
}

// checkLimit validates a rate and burst before they reach the bucket.
func checkLimit(rate float64, burst int) error {
	if math.IsNaN(rate) || rate < MinLimitRate || rate > MaxLimitRate {
		return fmt.Errorf("%w: rate %v not in [%v, %v]", ErrInvalidLimit, rate, MinLimitRate, MaxLimitRate)
	}
	if burst < 1 || burst > MaxBurst {
		return fmt.Errorf("%w: burst %d not in [1, %d]", ErrInvalidLimit, burst, MaxBurst)
	}
	return nil
}

// take grants n tokens at now if they are there; otherwise it changes
// nothing and returns the wait until they will be.
func (g *gcra) take(now time.Time, n int) (bool, time.Duration) {
	base := g.tat
	if base.Before(now) {
		base = now
	}
	newTAT := base.Add(time.Duration(n) * g.interval)
	allowAt := newTAT.Add(-time.Duration(g.burst) * g.interval)
	if now.Before(allowAt) {
		return false, allowAt.Sub(now)
	}
	g.tat = newTAT
	return true, 0
}

// tokens is how many tokens the bucket holds at now.
func (g *gcra) tokens(now time.Time) float64 {
	debt := g.tat.Sub(now)
	if debt <= 0 {
		return float64(g.burst)
	}
	t := float64(g.burst) - float64(debt)/float64(g.interval)
	if t < 0 {
		return 0
	}
	return t
}

// reconfigure switches to a new interval and burst at now, keeping the
// tokens the bucket holds (capped at the new burst). The debt is rounded up
// so the conversion never creates tokens.
func (g *gcra) reconfigure(now time.Time, interval time.Duration, burst int) {
	if interval == g.interval && burst == g.burst {
		return
	}
	if interval == g.interval {
		// Only the burst changes: stay in integer time.
		debt := g.tat.Sub(now)
		if debt < 0 {
			debt = 0
		}
		debt += time.Duration(burst-g.burst) * interval
		g.burst = burst
		if debt <= 0 {
			g.tat = time.Time{}
			return
		}
		g.tat = now.Add(debt)
		return
	}
	have := g.tokens(now)
	if have > float64(burst) {
		have = float64(burst)
	}
	debt := time.Duration(math.Ceil((float64(burst) - have) * float64(interval)))
	g.interval, g.burst = interval, burst
	if debt <= 0 {
		g.tat = time.Time{}
		return
	}
	g.tat = now.Add(debt)
}
