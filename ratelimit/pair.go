package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/wamux/wamux"
)

// Pair limit defaults. The Cloud API allows one message per 6 s from one
// business number to one user, and tolerates bursts (up to 45 in 6 s) that
// borrow from future quota: after a burst of n, nothing more to that user
// until n×6 s after it began (reference §3). A burst of 3 lets a short
// exchange (template, then a follow-up or two) go out at once while
// staying far from the point where the provider answers 131056.
const (
	DefaultPairInterval = 6 * time.Second
	DefaultPairBurst    = 3
)

// minSweep is the map size below which the pair limiter never sweeps: a
// small map costs nothing and sweeping it would be pure overhead.
const minSweep = 1024

// Pairs paces messages per (account, recipient) pair as Meta's pair rate
// limit does (see PairLimiter for the rule). PairLimiter keeps the pairs
// in process; a shared implementation (redislimit.Pairs) lets several
// nodes pace one pair together. Both pass ratelimittest.RunPairs.
type Pairs interface {
	// Wait reports how long until the pair may send; zero means now. It
	// takes nothing.
	Wait(ctx context.Context, accountID, recipient string) (time.Duration, error)
	// Take records one message sent to the pair, even one sent early.
	Take(ctx context.Context, accountID, recipient string) error
	// Reserve takes one message for the pair if it may send now;
	// otherwise it takes nothing and returns the wait.
	Reserve(ctx context.Context, accountID, recipient string) (bool, time.Duration, error)
	// OnPairLimited handles the provider's 131056 for the pair: its burst
	// is over and it waits at least a full interval from now.
	OnPairLimited(ctx context.Context, accountID, recipient string) error
	// SetPolicy changes the interval and burst for every pair, effective
	// for the next call; what pairs owe is kept.
	SetPolicy(interval time.Duration, burst int) error
	// Policy returns the current interval and burst.
	Policy() (time.Duration, int)
}

var _ Pairs = (*PairLimiter)(nil)

// PairConfig configures a PairLimiter.
type PairConfig struct {
	// Clock defaults to wamux.SystemClock.
	Clock wamux.Clock
	// Interval is the steady pace per pair; zero means DefaultPairInterval.
	Interval time.Duration
	// Burst is how many messages a quiet pair may send within one
	// Interval; zero means DefaultPairBurst.
	Burst int
}

// PairLimiter paces messages per (account, recipient) pair as Meta's pair
// rate limit does: every message borrows one Interval; a pair that owes
// nothing (quiet) may start a burst of up to Burst messages within one
// Interval of its first; once that burst is over, the pair sends nothing
// until what it borrowed is repaid. A steady sender gets one message per
// Interval. A token bucket of size Burst would not do: it lets a pair
// burst, pause one Interval and send again, which the provider answers
// with 131056 (a burst of 3 at 6 s means nothing more for 18 s). A wait
// applies to that recipient only, so the dispatcher can send to other
// recipients of the same account meanwhile.
//
// Memory stays bounded: a pair that owes nothing is indistinguishable from
// one never seen, so it is dropped. Sweeps run when the map has doubled
// since the last one, which keeps their cost amortised O(1) per call; the
// pairs left are those that sent within the last Burst×Interval, at most
// rate×Burst×Interval per account.
type PairLimiter struct {
	clock wamux.Clock

	mu       sync.Mutex
	interval time.Duration
	burst    int
	pairs    map[pairKey]pairState
	sweepAt  int
}

type pairKey struct{ account, recipient string }

// pairState is a pair's debt: when its current burst began, when what it
// borrowed is repaid, how many messages the burst has had, and whether the
// provider closed the burst (131056). The count is kept, not derived from
// the debt: after SetPolicy changes the interval, the debt measured in the
// new interval no longer says how many messages were sent.
type pairState struct {
	start, repaid time.Time
	n             int
	closed        bool
}

// NewPairLimiter builds a pair limiter.
func NewPairLimiter(cfg PairConfig) (*PairLimiter, error) {
	if cfg.Clock == nil {
		cfg.Clock = wamux.SystemClock{}
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
		pairs:    make(map[pairKey]pairState),
		sweepAt:  minSweep,
	}, nil
}

// CheckPairPolicy reports an interval or burst out of bounds
// (ErrInvalidLimit): the interval in (0, 1h], the burst in [1, 1000].
func CheckPairPolicy(interval time.Duration, burst int) error {
	return checkPairPolicy(interval, burst)
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
// next check. What a pair owes is kept as it is, and so are the messages a
// burst under way has had.
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

// inBurst reports whether a pair that owes something may still add to its
// burst: within one interval of the burst's start and below burst messages.
func (p *PairLimiter) inBurst(s pairState, now time.Time) bool {
	return !s.closed && now.Sub(s.start) < p.interval && s.n < p.burst
}

// wait is how long until the pair may send one message. The caller holds p.mu.
func (p *PairLimiter) wait(now time.Time, k pairKey) time.Duration {
	s, ok := p.pairs[k]
	if !ok || !s.repaid.After(now) || p.inBurst(s, now) {
		return 0
	}
	return s.repaid.Sub(now)
}

// record counts one message for the pair, whether or not it was early. The
// caller holds p.mu.
func (p *PairLimiter) record(now time.Time, k pairKey) {
	s, ok := p.pairs[k]
	if !ok || !s.repaid.After(now) {
		s = pairState{start: now, repaid: now} // quiet: a new burst
	}
	s.repaid = s.repaid.Add(p.interval)
	s.n++
	p.pairs[k] = s
	if len(p.pairs) >= p.sweepAt {
		p.sweep(now)
	}
}

// sweep drops pairs that owe nothing. The caller holds p.mu.
func (p *PairLimiter) sweep(now time.Time) {
	for k, s := range p.pairs {
		if !s.repaid.After(now) {
			delete(p.pairs, k)
		}
	}
	p.sweepAt = max(minSweep, 2*len(p.pairs))
}

// Wait reports how long until the pair may send; zero means now. It takes
// nothing.
func (p *PairLimiter) Wait(_ context.Context, accountID, recipient string) (time.Duration, error) {
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.wait(now, pairKey{accountID, recipient}), nil
}

// Take records one message sent to the pair. It records even an early send
// (one made without asking), so the pair's next wait accounts for it.
func (p *PairLimiter) Take(_ context.Context, accountID, recipient string) error {
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record(now, pairKey{accountID, recipient})
	return nil
}

// Reserve takes one message for the pair if it may send now; otherwise it
// takes nothing and returns the wait.
func (p *PairLimiter) Reserve(_ context.Context, accountID, recipient string) (bool, time.Duration, error) {
	now := p.clock.Now()
	k := pairKey{accountID, recipient}
	p.mu.Lock()
	defer p.mu.Unlock()
	if w := p.wait(now, k); w > 0 {
		return false, w, nil
	}
	p.record(now, k)
	return true, 0, nil
}

// OnPairLimited handles the provider's 131056 for the pair: its burst is
// over, and it waits at least a full Interval from now. The provider counts
// messages we cannot see (other senders, its own accounting), and its
// answer beats our estimate; once the pair owes nothing it may burst
// again (the dispatcher's retry also backs off 4^X s, as Meta advises).
func (p *PairLimiter) OnPairLimited(_ context.Context, accountID, recipient string) error {
	now := p.clock.Now()
	k := pairKey{accountID, recipient}
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.pairs[k]
	if !ok || !s.repaid.After(now) {
		s = pairState{start: now, repaid: now}
	}
	s.closed = true
	if full := now.Add(p.interval); s.repaid.Before(full) {
		s.repaid = full
	}
	p.pairs[k] = s
	return nil
}

// Len reports how many pairs are tracked (for tests and metrics).
func (p *PairLimiter) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pairs)
}
