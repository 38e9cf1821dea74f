// Package ratelimittest is the conformance suite every ratelimit.Limiter
// implementation passes: the in-process one and the Redis one. It proves
// guarantee 6 (at most rate×T + burst grants in any window T) together with
// the properties a dispatcher relies on: the budget is used, limits change
// at once, accounts are independent, concurrency does not break the
// bound, and debits (messages we did not send) count against it, within
// the bound ratelimit.MaxDebt.
package ratelimittest

import (
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/ratelimit"
)

// NewLimiter builds a fresh limiter that reads time from clock. Each call
// must return a limiter with no accounts in it.
type NewLimiter func(t *testing.T, clock wamux.Clock) ratelimit.Limiter

// Options tune the suite to a limiter's cost per call.
type Options struct {
	// UtilizationWindow is the virtual time over which Utilization
	// drains buckets of up to 1,000/s (default 100 s: some 200,000
	// calls, which a limiter a network round trip away takes a minute
	// for).
	UtilizationWindow time.Duration
}

// Run runs the whole suite against the limiters newLimiter builds.
func Run(t *testing.T, newLimiter NewLimiter) { RunWith(t, newLimiter, Options{}) }

// RunWith runs the whole suite with opts.
func RunWith(t *testing.T, newLimiter NewLimiter, opts Options) {
	if opts.UtilizationWindow <= 0 {
		opts.UtilizationWindow = 100 * time.Second
	}
	t.Run("Bound", func(t *testing.T) { testBound(t, newLimiter) })
	t.Run("WaitIsHonest", func(t *testing.T) { testWaitIsHonest(t, newLimiter) })
	t.Run("Utilization", func(t *testing.T) { testUtilization(t, newLimiter, opts.UtilizationWindow) })
	t.Run("SetLimitLowersAtOnce", func(t *testing.T) { testSetLimitLowers(t, newLimiter) })
	t.Run("SetLimitRaisesAtOnce", func(t *testing.T) { testSetLimitRaises(t, newLimiter) })
	t.Run("LargerBurstFillsOverTime", func(t *testing.T) { testLargerBurst(t, newLimiter) })
	t.Run("Tokens", func(t *testing.T) { testTokens(t, newLimiter) })
	t.Run("AccountsIndependent", func(t *testing.T) { testIndependent(t, newLimiter) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, newLimiter) })
	t.Run("Errors", func(t *testing.T) { testErrors(t, newLimiter) })
	t.Run("DebitGoesBelowZero", func(t *testing.T) { testDebit(t, newLimiter) })
	t.Run("DebitBounded", func(t *testing.T) { testDebitBounded(t, newLimiter) })
	t.Run("DebitCounts", func(t *testing.T) { testDebitCounts(t, newLimiter) })
}
