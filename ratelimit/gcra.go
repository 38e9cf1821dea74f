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

// debit takes n tokens at now whatever the bucket holds; it may go below
// zero, by at most MaxDebt of refill. A tat already past that bound (it
// cannot be, but a later bound must never hand tokens back) is kept.
func (g *gcra) debit(now time.Time, n int) {
	base := g.tat
	if base.Before(now) {
		base = now
	}
	limit := g.debtLimit(now)
	// n above what the bound holds would only overflow the product.
	n = min(n, g.burst+int(MaxDebt/g.interval)+1)
	newTAT := base.Add(time.Duration(n) * g.interval)
	if newTAT.After(limit) {
		newTAT = limit
	}
	if newTAT.After(g.tat) {
		g.tat = newTAT
	}
}

// debtLimit is the latest tat debit may leave at now: an empty bucket
// plus MaxDebt.
func (g *gcra) debtLimit(now time.Time) time.Time {
	return now.Add(time.Duration(g.burst)*g.interval + MaxDebt)
}

// level is how many tokens the bucket holds at now, below zero when it is
// in debt.
func (g *gcra) level(now time.Time) float64 {
	debt := g.tat.Sub(now)
	if debt <= 0 {
		return float64(g.burst)
	}
	return float64(g.burst) - float64(debt)/float64(g.interval)
}

// tokens is how many tokens the bucket holds at now; none when in debt.
func (g *gcra) tokens(now time.Time) float64 {
	return max(g.level(now), 0)
}

// reconfigure switches to a new interval and burst at now, keeping the
// tokens the bucket holds (capped at the new burst) or owes (Debit; capped
// at MaxDebt of the new rate). The debt is rounded up so the conversion
// never creates tokens.
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
	have := min(g.level(now), float64(burst))
	debt := time.Duration(math.Ceil((float64(burst) - have) * float64(interval)))
	g.interval, g.burst = interval, burst
	if debt <= 0 {
		g.tat = time.Time{}
		return
	}
	g.tat = now.Add(debt)
	if limit := g.debtLimit(now); g.tat.After(limit) {
		g.tat = limit
	}
}
