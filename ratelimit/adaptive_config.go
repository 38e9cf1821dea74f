package ratelimit

import (
	"fmt"
	"time"

	"github.com/wamux/wamux"
)

// Adaptive defaults. They follow the provider's advice for 130429 ("short
// backoff on that number") and the runtime settings cooldown_min and
// cooldown_max of the design.
const (
	// DefaultDecreaseFactor takes 10 % off the effective rate on each
	// counted throttle: the multiplicative decrease of AIMD. A rare
	// 130429 (a request that arrived early at the provider) costs a small
	// step; throttles that keep coming compound it and then start a
	// cooldown.
	DefaultDecreaseFactor = 0.9
	// DefaultMinRate is the floor the decrease never goes below (or the
	// configured rate, if that is lower).
	DefaultMinRate = 1.0
	// DefaultIncreaseStep is the fraction of the configured rate regained
	// per DefaultIncreaseInterval: the additive increase. After one
	// decrease the account is back at its configured rate 2 s later.
	DefaultIncreaseStep     = 0.05
	DefaultIncreaseInterval = time.Second
	// DefaultThrottleHold absorbs echoes: a throttle less than this after
	// the last counted one is the same overload seen by requests that were
	// already in flight, and is not counted again.
	DefaultThrottleHold = time.Second
	// DefaultCooldownAfter counted throttles, each within
	// DefaultThrottleWindow of the previous one, start a cooldown. The
	// window is short: throttles that keep coming although each took 10 %
	// off the rate mean an overload; one now and then (a request that
	// arrived early) is paid for by its step down.
	DefaultCooldownAfter  = 3
	DefaultThrottleWindow = 3 * time.Second
	// DefaultCooldownMin and DefaultCooldownMax bound the cooldown, which
	// doubles from one cooldown to the next.
	DefaultCooldownMin = 30 * time.Second
	DefaultCooldownMax = 2 * time.Minute
	// DefaultCooldownReset is the quiet period (no counted throttle, no
	// cooldown) after which the next cooldown starts at the minimum again.
	DefaultCooldownReset = 5 * time.Minute
)

// AdaptiveConfig configures Adaptive. Zero fields take the defaults above.
type AdaptiveConfig struct {
	Clock wamux.Clock
	// DefaultRate and DefaultBurst are the limit of accounts never given
	// one; they should match the wrapped limiter's defaults.
	DefaultRate  float64
	DefaultBurst int

	DecreaseFactor   float64
	MinRate          float64
	IncreaseStep     float64
	IncreaseInterval time.Duration

	ThrottleHold   time.Duration
	CooldownAfter  int
	ThrottleWindow time.Duration
	CooldownMin    time.Duration
	CooldownMax    time.Duration
	CooldownReset  time.Duration
}

func (c *AdaptiveConfig) setDefaults() {
	if c.Clock == nil {
		c.Clock = wamux.SystemClock{}
	}
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.DefaultRate, DefaultRate)
	if c.DefaultBurst == 0 {
		c.DefaultBurst = DefaultBurst
	}
	def(&c.DecreaseFactor, DefaultDecreaseFactor)
	def(&c.MinRate, DefaultMinRate)
	def(&c.IncreaseStep, DefaultIncreaseStep)
	defD(&c.IncreaseInterval, DefaultIncreaseInterval)
	defD(&c.ThrottleHold, DefaultThrottleHold)
	if c.CooldownAfter == 0 {
		c.CooldownAfter = DefaultCooldownAfter
	}
	defD(&c.ThrottleWindow, DefaultThrottleWindow)
	defD(&c.CooldownMin, DefaultCooldownMin)
	defD(&c.CooldownMax, DefaultCooldownMax)
	defD(&c.CooldownReset, DefaultCooldownReset)
}

func (c *AdaptiveConfig) validate() error {
	if err := checkLimit(c.DefaultRate, c.DefaultBurst); err != nil {
		return fmt.Errorf("default limit: %w", err)
	}
	switch {
	case !(c.DecreaseFactor > 0 && c.DecreaseFactor < 1):
		return fmt.Errorf("%w: decrease factor %v not in (0, 1)", ErrInvalidLimit, c.DecreaseFactor)
	case c.MinRate < MinLimitRate:
		return fmt.Errorf("%w: min rate %v below %v", ErrInvalidLimit, c.MinRate, MinLimitRate)
	case !(c.IncreaseStep > 0 && c.IncreaseStep <= 1):
		return fmt.Errorf("%w: increase step %v not in (0, 1]", ErrInvalidLimit, c.IncreaseStep)
	case c.IncreaseInterval < 0 || c.ThrottleHold < 0 || c.ThrottleWindow < 0 || c.CooldownReset < 0:
		return fmt.Errorf("%w: negative duration", ErrInvalidLimit)
	case c.CooldownAfter < 1:
		return fmt.Errorf("%w: cooldown after %d throttles", ErrInvalidLimit, c.CooldownAfter)
	}
	return checkCooldown(c.CooldownMin, c.CooldownMax)
}

func checkCooldown(minD, maxD time.Duration) error {
	if minD <= 0 || maxD < minD {
		return fmt.Errorf("%w: cooldown min %v, max %v: want 0 < min <= max", ErrInvalidLimit, minD, maxD)
	}
	return nil
}
