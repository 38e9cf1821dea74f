package ratelimit

import (
	"fmt"
	"sync"
	"time"
)

// Pair limit defaults. The Cloud API allows one message per 6 s from one
// business number to one user, and tolerates short bursts (up to 45) that
// borrow from future quota. A burst of 3 lets a short exchange (template,
// then a follow-up or two) go out at once while staying far from the point
// where the provider answers 131056.
const (
	DefaultPairInterval = 6 * time.Second
	DefaultPairBurst    = 3
)

// minSweep is the map size below which the pair limiter never sweeps: a
// small map costs nothing and sweeping it would be pure overhead.
const minSweep = 1024

// PairConfig configures a PairLimiter.
type PairConfig struct {
	// Clock defaults to SystemClock.
	Clock Clock
	// Interval is the steady pace per pair; zero means DefaultPairInterval.
	Interval time.Duration
	// Burst is how many messages a quiet pair may send at once; zero means
	// DefaultPairBurst.
	Burst int
}

// PairLimiter paces messages per (account, recipient) pair: at most Burst at
// once, then one per Interval. A wait applies to that recipient only, so the
// dispatcher can send to other recipients of the same account meanwhile.
//
// Memory stays bounded: a pair whose bucket has refilled is
// indistinguishable from one never seen, so it is dropped. Sweeps run when
// the map has doubled since the last one, which keeps their cost amortised
// O(1) per call; the pairs left are those that sent within the last
// Burst×Interval, at most rate×Burst×Interval per account.
type PairLimiter struct {
	clock Clock

	mu       sync.Mutex
	interval time.Duration
	burst    int
	// pairs holds each pair's theoretical arrival time (see gcra): when
	// its bucket will be full again.
	pairs   map[pairKey]time.Time
	sweepAt int
}

type pairKey struct{ account, recipient string }

// NewPairLimiter builds a pair limiter.
func NewPairLimiter(cfg PairConfig) (*PairLimiter, error) {
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultPairInterval
	}
	if cfg.Burst == 0 {
		cfg.Burst = DefaultPairBurst
	}
	if err := checkPairPolicy(cfg.Interval, cfg.Burst); err != nil {
		return nil, err
	}
	return &PairLimiter{
		clock:    cfg.Clock,
		interval: cfg.Interval,
		burst:    cfg.Burst,
		pairs:    make(map[pairKey]time.Time),
		sweepAt:  minSweep,
	}, nil
}

func checkPairPolicy(interval time.Duration, burst int) error {
	if interval <= 0 || interval > time.Hour {
		return fmt.Errorf("%w: pair interval %v not in (0, 1h]", ErrInvalidLimit, interval)
	}
	if burst < 1 || burst > 1000 {
		return fmt.Errorf("%w: pair burst %d not in [1, 1000]", ErrInvalidLimit, burst)
	}
	return nil
}

// SetPolicy changes the pace and burst for every pair, effective for the
// next check. A pair's outstanding debt (time until its bucket is full) is
// kept as it is.
func (p *PairLimiter) SetPolicy(interval time.Duration, burst int) error {
	if err := checkPairPolicy(interval, burst); err != nil {
		return fmt.Errorf("set pair policy: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.interval, p.burst = interval, burst
	return nil
}

// Policy returns the current pace and burst.
func (p *PairLimiter) Policy() (time.Duration, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.interval, p.burst
}

// wait is how long until the pair may send one message. The caller holds p.mu.
func (p *PairLimiter) wait(now time.Time, k pairKey) time.Duration {
	tat, ok := p.pairs[k]
	if !ok || !tat.After(now) {
		return 0
	}
	allowAt := tat.Add(p.interval - time.Duration(p.burst)*p.interval)
	if now.Before(allowAt) {
		return allowAt.Sub(now)
	}
	return 0
}

// record counts one message for the pair, whether or not it was early. The
// caller holds p.mu.
func (p *PairLimiter) record(now time.Time, k pairKey) {
	tat, ok := p.pairs[k]
	if !ok || tat.Before(now) {
		tat = now
	}
	p.pairs[k] = tat.Add(p.interval)
	if len(p.pairs) >= p.sweepAt {
		p.sweep(now)
	}
}

// sweep drops pairs whose bucket is full again. The caller holds p.mu.
func (p *PairLimiter) sweep(now time.Time) {
	for k, tat := range p.pairs {
		if !tat.After(now) {
			delete(p.pairs, k)
		}
	}
	p.sweepAt = max(minSweep, 2*len(p.pairs))
}

// Wait reports how long until the pair may send; zero means now. It takes
// nothing.
func (p *PairLimiter) Wait(accountID, recipient string) time.Duration {
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.wait(now, pairKey{accountID, recipient})
}

// Take records one message sent to the pair. It records even an early send
// (one made without asking), so the pair's next wait accounts for it.
func (p *PairLimiter) Take(accountID, recipient string) {
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record(now, pairKey{accountID, recipient})
}

// Reserve takes one message for the pair if it may send now; otherwise it
// takes nothing and returns the wait.
func (p *PairLimiter) Reserve(accountID, recipient string) (bool, time.Duration) {
	now := p.clock.Now()
	k := pairKey{accountID, recipient}
	p.mu.Lock()
	defer p.mu.Unlock()
	if w := p.wait(now, k); w > 0 {
		return false, w
	}
	p.record(now, k)
	return true, 0
}

// OnPairLimited handles the provider's 131056 for the pair: it empties the
// pair's burst, so the next message waits a full Interval. The provider
// counts messages we cannot see (other senders, its own burst accounting),
// and its answer beats our estimate.
func (p *PairLimiter) OnPairLimited(accountID, recipient string) {
	now := p.clock.Now()
	k := pairKey{accountID, recipient}
	p.mu.Lock()
	defer p.mu.Unlock()
	full := now.Add(time.Duration(p.burst) * p.interval)
	if tat, ok := p.pairs[k]; !ok || tat.Before(full) {
		p.pairs[k] = full
	}
}

// Len reports how many pairs are tracked (for tests and metrics).
func (p *PairLimiter) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pairs)
}
