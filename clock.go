package wamux

import "time"

// Clock tells the time to the parts whose rules depend on it: token
// buckets, pair limits, cooldowns, reorder-buffer gap timeouts, quiet
// periods. Production code uses SystemClock; tests pass one they move by
// hand (internal/fakeclock), so those rules run on virtual time.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }
