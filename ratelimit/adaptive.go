package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/wamux/wamux"
)

// Adaptive wraps a Limiter and adapts each account's rate to what the
// provider tolerates (AIMD), and cools an account down when it keeps being
// throttled.
//
// Decrease: each counted throttle (OnThrottled) multiplies the effective
// rate by DecreaseFactor, never below min(MinRate, configured rate).
// Throttles within ThrottleHold of the last counted one, or during a
// cooldown, are echoes of requests already in flight and are not counted.
//
// Increase: from a decrease (or the end of a cooldown) the effective rate
// climbs by IncreaseStep × configured rate every IncreaseInterval until it is
// the configured rate again. The climb is a function of time, not of
// successes, so an account that went idle while throttled is back at full
// rate when traffic returns.
//
// Cooldown: CooldownAfter counted throttles, each within ThrottleWindow of
// the previous one (or of the end of the previous cooldown), start a
// cooldown: the account gets no tokens until it ends. Its length starts at
// CooldownMin and doubles with each cooldown up to CooldownMax. A throttle
// within ThrottleWindow after a cooldown ends starts the next, longer one at
// once. After CooldownReset without any counted throttle or cooldown, the
// length starts at CooldownMin again.
//
// The effective rate is pushed to the wrapped limiter with SetLimit, so the
// bound of guarantee 6 is the wrapped limiter's: the effective rate is never
// above the configured one.
type Adaptive struct {
	inner Limiter
	cfg   AdaptiveConfig // cooldown bounds may change; read under mu

	mu       sync.Mutex
	accounts map[string]*adaptiveAccount
}

var _ Limiter = (*Adaptive)(nil)

// adaptiveAccount is one account's adaptive state; its mutex also
// serialises the account's calls to the wrapped limiter, so a pushed rate
// and the reservation that follows it are not interleaved with another's.
type adaptiveAccount struct {
	mu    sync.Mutex
	rate  float64 // configured
	burst int

	pushed       bool // whether inner has been given applied/appliedBurst
	applied      float64
	appliedBurst int

	base      float64   // effective rate right after the last decrease
	climbFrom time.Time // zero when at the configured rate

	lastThrottle  time.Time // last counted throttle
	streak        int       // counted throttles in a row, each within the window
	nextCooldown  time.Duration
	cooldownUntil time.Time
}

// AccountLimit is an account's limit as the API and dashboard show it.
type AccountLimit struct {
	// State is wamux.AccountActive or wamux.AccountCooldown.
	State wamux.AccountState
	// CooldownUntil is when the cooldown ends; zero when active.
	CooldownUntil time.Time
	// Rate and Burst are the configured limit.
	Rate  float64
	Burst int
	// EffectiveRate is the rate after adaptation (≤ Rate); during a
	// cooldown, the rate the account resumes at.
	EffectiveRate float64
	// NextCooldown is how long the next cooldown would last.
	NextCooldown time.Duration
}

// NewAdaptive wraps inner. inner must not be used directly afterwards for
// the same accounts, or its limits would drift from the adaptive ones.
func NewAdaptive(inner Limiter, cfg AdaptiveConfig) (*Adaptive, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("adaptive limiter: %w", err)
	}
	return &Adaptive{inner: inner, cfg: cfg, accounts: make(map[string]*adaptiveAccount)}, nil
}

// account returns the state of an account, creating it with the default
// limit.
func (a *Adaptive) account(accountID string) *adaptiveAccount {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.accounts[accountID]
	if !ok {
		s = &adaptiveAccount{rate: a.cfg.DefaultRate, burst: a.cfg.DefaultBurst, nextCooldown: a.cfg.CooldownMin}
		a.accounts[accountID] = s
	}
	return s
}

// cooldownBounds reads the runtime-changeable cooldown bounds.
func (a *Adaptive) cooldownBounds() (time.Duration, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg.CooldownMin, a.cfg.CooldownMax
}

// SetCooldown changes cooldown_min and cooldown_max at runtime; cooldowns
// already running keep their end.
func (a *Adaptive) SetCooldown(minD, maxD time.Duration) error {
	if err := checkCooldown(minD, maxD); err != nil {
		return fmt.Errorf("set cooldown: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cfg.CooldownMin, a.cfg.CooldownMax = minD, maxD
	return nil
}

// effective is the account's rate at now after adaptation. Once the climb
// reaches the configured rate it ends. The caller holds s.mu.
func (a *Adaptive) effective(s *adaptiveAccount, now time.Time) float64 {
	if s.climbFrom.IsZero() {
		return s.rate
	}
	if now.Before(s.climbFrom) {
		return min(s.base, s.rate)
	}
	steps := 1.0
	if a.cfg.IncreaseInterval > 0 {
		steps = float64(now.Sub(s.climbFrom) / a.cfg.IncreaseInterval)
	}
	eff := s.base + steps*a.cfg.IncreaseStep*s.rate
	if eff >= s.rate {
		s.climbFrom = time.Time{}
		return s.rate
	}
	return eff
}

// push gives the wrapped limiter the account's effective rate if it
// changed. The caller holds s.mu.
func (a *Adaptive) push(ctx context.Context, accountID string, s *adaptiveAccount, now time.Time) error {
	eff := a.effective(s, now)
	if s.pushed && eff == s.applied && s.burst == s.appliedBurst {
		return nil
	}
	if err := a.inner.SetLimit(ctx, accountID, eff, s.burst); err != nil {
		return fmt.Errorf("apply effective rate %v: %w", eff, err)
	}
	s.pushed, s.applied, s.appliedBurst = true, eff, s.burst
	return nil
}

// Reserve implements Limiter; during a cooldown it grants nothing and
// reports the time until the cooldown ends.
func (a *Adaptive) Reserve(ctx context.Context, accountID string, n int) (bool, time.Duration, error) {
	if n < 1 {
		return false, 0, fmt.Errorf("reserve %d tokens for %s: %w", n, accountID, ErrInvalidCount)
	}
	s := a.account(accountID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > s.burst {
		return false, 0, fmt.Errorf("reserve %d tokens for %s (burst %d): %w", n, accountID, s.burst, ErrExceedsBurst)
	}
	now := a.cfg.Clock.Now()
	if now.Before(s.cooldownUntil) {
		return false, s.cooldownUntil.Sub(now), nil
	}
	if err := a.push(ctx, accountID, s, now); err != nil {
		return false, 0, fmt.Errorf("reserve for %s: %w", accountID, err)
	}
	return a.inner.Reserve(ctx, accountID, n)
}

// SetLimit implements Limiter. It changes the configured limit; an account
// that is climbing back keeps climbing, towards the new rate.
func (a *Adaptive) SetLimit(ctx context.Context, accountID string, rate float64, burst int) error {
	if err := checkLimit(rate, burst); err != nil {
		return fmt.Errorf("set limit of %s: %w", accountID, err)
	}
	s := a.account(accountID)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rate, s.burst = rate, burst
	if err := a.push(ctx, accountID, s, a.cfg.Clock.Now()); err != nil {
		return fmt.Errorf("set limit of %s: %w", accountID, err)
	}
	return nil
}

// Tokens implements Limiter; an account in cooldown has none.
func (a *Adaptive) Tokens(ctx context.Context, accountID string) (float64, error) {
	s := a.account(accountID)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := a.cfg.Clock.Now()
	if now.Before(s.cooldownUntil) {
		return 0, nil
	}
	if err := a.push(ctx, accountID, s, now); err != nil {
		return 0, fmt.Errorf("tokens of %s: %w", accountID, err)
	}
	return a.inner.Tokens(ctx, accountID)
}

// Debit implements Limiter. It charges the wrapped bucket at the
// effective rate, during a cooldown too: the messages used the number's
// throughput all the same.
func (a *Adaptive) Debit(ctx context.Context, accountID string, n int) error {
	if n < 1 {
		return fmt.Errorf("debit %d tokens of %s: %w", n, accountID, ErrInvalidCount)
	}
	s := a.account(accountID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := a.push(ctx, accountID, s, a.cfg.Clock.Now()); err != nil {
		return fmt.Errorf("debit for %s: %w", accountID, err)
	}
	return a.inner.Debit(ctx, accountID, n)
}

// OnThrottled reports a throughput error from the provider for the account
// (130429, 4 or 80007) and returns the account's new limit state, which the
// caller may persist (CooldownUntil) and show.
func (a *Adaptive) OnThrottled(accountID string) AccountLimit {
	l, _ := a.Throttle(accountID)
	return l
}

// Throttle is OnThrottled that also reports whether this throttle started
// a cooldown. One that comes during a cooldown (a request that was in
// flight when it started) starts none, though the state it returns is a
// cooldown: a caller counting cooldowns counts only started ones.
func (a *Adaptive) Throttle(accountID string) (AccountLimit, bool) {
	minC, maxC := a.cooldownBounds()
	s := a.account(accountID)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := a.cfg.Clock.Now()
	if now.Before(s.cooldownUntil) {
		return a.limit(s, now), false
	}
	if !s.lastThrottle.IsZero() && now.Sub(s.lastThrottle) < a.cfg.ThrottleHold {
		return a.limit(s, now), false
	}
	ref := s.lastThrottle
	if s.cooldownUntil.After(ref) {
		ref = s.cooldownUntil
	}
	if s.lastThrottle.IsZero() || now.Sub(ref) >= a.cfg.CooldownReset {
		s.nextCooldown = minC
	}
	if !s.lastThrottle.IsZero() && now.Sub(ref) <= a.cfg.ThrottleWindow {
		s.streak++
	} else {
		s.streak = 1
	}
	s.lastThrottle = now

	floor := min(a.cfg.MinRate, s.rate)
	s.base = max(floor, a.effective(s, now)*a.cfg.DecreaseFactor)
	s.climbFrom = now

	if s.streak >= a.cfg.CooldownAfter {
		d := min(max(s.nextCooldown, minC), maxC)
		s.cooldownUntil = now.Add(d)
		s.nextCooldown = min(2*d, maxC)
		s.climbFrom = s.cooldownUntil
		// One more throttle soon after the cooldown means it was not
		// enough: the next, longer cooldown starts at once.
		s.streak = a.cfg.CooldownAfter - 1
		return a.limit(s, now), true
	}
	return a.limit(s, now), false
}

// CoolDown puts the account in cooldown until the given time (a
// Retry-After from the provider, or a cooldown restored from the store after
// a restart). It never shortens a running cooldown. It reports whether it
// started one: none was running, and until is in the future.
func (a *Adaptive) CoolDown(accountID string, until time.Time) bool {
	s := a.account(accountID)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := a.cfg.Clock.Now()
	started := !now.Before(s.cooldownUntil) && until.After(now)
	if until.After(s.cooldownUntil) {
		s.cooldownUntil = until
	}
	return started
}

// EndCooldown ends a running cooldown now (an operator re-activated the
// account). The rate climbs back from where the cooldown left it.
func (a *Adaptive) EndCooldown(accountID string) {
	s := a.account(accountID)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := a.cfg.Clock.Now()
	if now.Before(s.cooldownUntil) {
		s.cooldownUntil = now
		if s.climbFrom.After(now) {
			s.climbFrom = now
		}
	}
}

// Limit returns the account's current limit state.
func (a *Adaptive) Limit(accountID string) AccountLimit {
	s := a.account(accountID)
	s.mu.Lock()
	defer s.mu.Unlock()
	return a.limit(s, a.cfg.Clock.Now())
}

// limit builds the AccountLimit. The caller holds s.mu.
func (a *Adaptive) limit(s *adaptiveAccount, now time.Time) AccountLimit {
	l := AccountLimit{
		State:         wamux.AccountActive,
		Rate:          s.rate,
		Burst:         s.burst,
		EffectiveRate: a.effective(s, now),
		NextCooldown:  s.nextCooldown,
	}
	if now.Before(s.cooldownUntil) {
		l.State, l.CooldownUntil = wamux.AccountCooldown, s.cooldownUntil
	}
	return l
}
