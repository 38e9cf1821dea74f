package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
)

// ProbeEveryDefault is how often a degraded Fallback asks the shared
// limiter again.
const ProbeEveryDefault = time.Second

// FallbackConfig configures a Fallback.
type FallbackConfig struct {
	// Shared is the limiter every node shares (redislimit.Limiter).
	Shared Limiter
	// Share is the part of each account's rate and burst this node takes
	// while the shared limiter does not answer, in (0, 1]: 1/N for N
	// nodes sending for one account, 1 when each account has one owner.
	Share float64
	// ProbeEvery is how often, while degraded, a Reserve tries the shared
	// limiter again; ProbeEveryDefault when zero.
	ProbeEvery time.Duration
	// Clock defaults to wamux.SystemClock; the local buckets use it too.
	Clock wamux.Clock
	// Logger reports each change of mode; none when nil.
	Logger *slog.Logger
	// Registry, when set, gets the gauge
	// wamux_ratelimit_degraded{what="limiter"} (1 while this node limits
	// on its own).
	Registry prometheus.Registerer
}

// Fallback is a Limiter that uses a shared limiter and, while that one
// fails (Redis unreachable), limits each account on its own to Share of
// its rate and burst, so that all nodes together stay within the
// account's limit. Every Reserve while degraded is answered locally except
// one per ProbeEvery, which asks the shared limiter and, when it answers,
// returns to it. Limits set meanwhile reach the shared limiter at the
// first Reserve after its return.
type Fallback struct {
	shared Limiter
	local  *Local
	share  float64
	log    *slog.Logger
	mode   *degradation

	mu     sync.Mutex
	limits map[string]limit // as set, for the shared limiter's return
	stale  map[string]bool  // accounts whose limit the shared limiter missed
}

type limit struct {
	rate  float64
	burst int
}

var _ Limiter = (*Fallback)(nil)

// NewFallback builds a Fallback; it starts on the shared limiter.
func NewFallback(cfg FallbackConfig) (*Fallback, error) {
	if cfg.Shared == nil {
		return nil, errors.New("ratelimit: fallback needs a shared limiter")
	}
	if !(cfg.Share > 0 && cfg.Share <= 1) {
		return nil, fmt.Errorf("%w: fallback share %v not in (0, 1]", ErrInvalidLimit, cfg.Share)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	mode, err := newDegradation("limiter", cfg.ProbeEvery, cfg.Clock, cfg.Logger, cfg.Registry)
	if err != nil {
		return nil, err
	}
	local, err := NewLocal(LocalConfig{Clock: mode.clock, DefaultRate: DefaultRate * cfg.Share,
		DefaultBurst: localBurst(DefaultBurst, cfg.Share)})
	if err != nil {
		return nil, err
	}
	return &Fallback{shared: cfg.Shared, local: local, share: cfg.Share, log: cfg.Logger, mode: mode,
		limits: map[string]limit{}, stale: map[string]bool{}}, nil
}

// localBurst is the share of burst, at least 1.
func localBurst(burst int, share float64) int {
	return max(1, int(math.Floor(float64(burst)*share+1e-9)))
}

// Degraded reports whether the node limits on its own.
func (f *Fallback) Degraded() bool { return f.mode.on() }

// failed reports whether err is the shared limiter failing, not a refusal
// of the request itself.
func failed(err error) bool {
	return err != nil && !errors.Is(err, ErrInvalidCount) && !errors.Is(err, ErrExceedsBurst) && !errors.Is(err, ErrInvalidLimit)
}

func (f *Fallback) degrade(err error) {
	f.mode.fail(err, "shared rate limiter unreachable: each account limited to this node's share", "share", f.share)
}

// recover returns to the shared limiter, giving it the limits it missed.
func (f *Fallback) recover(ctx context.Context) {
	f.mu.Lock()
	stale := f.stale
	f.stale = map[string]bool{}
	todo := make(map[string]limit, len(stale))
	for id := range stale {
		todo[id] = f.limits[id]
	}
	f.mu.Unlock()
	for id, l := range todo {
		if err := f.shared.SetLimit(ctx, id, l.rate, l.burst); err != nil {
			f.mu.Lock()
			f.stale[id] = true
			f.mu.Unlock()
			f.log.Error("restore account limit in the shared limiter", "account_id", id, "err", err)
		}
	}
	f.mode.clear("shared rate limiter answers again")
}

// Reserve implements Limiter.
func (f *Fallback) Reserve(ctx context.Context, accountID string, n int) (bool, time.Duration, error) {
	if f.mode.askShared() {
		ok, wait, err := f.shared.Reserve(ctx, accountID, n)
		if !failed(err) {
			if f.mode.on() {
				f.recover(ctx)
			}
			return ok, wait, err
		}
		f.degrade(err)
	}
	return f.local.Reserve(ctx, accountID, f.localCount(accountID, n))
}

// localCount caps n at the account's local burst: a reservation the
// shared bucket could grant must not become one the smaller local bucket
// never can.
func (f *Fallback) localCount(accountID string, n int) int {
	f.mu.Lock()
	l, ok := f.limits[accountID]
	f.mu.Unlock()
	if !ok {
		l.burst = DefaultBurst
	}
	return min(n, localBurst(l.burst, f.share))
}

// SetLimit implements Limiter. The local share is set at once; the shared
// limit as soon as the shared limiter answers.
func (f *Fallback) SetLimit(ctx context.Context, accountID string, rate float64, burst int) error {
	if err := f.local.SetLimit(ctx, accountID, max(rate*f.share, MinLimitRate), localBurst(burst, f.share)); err != nil {
		return err
	}
	f.mu.Lock()
	f.limits[accountID] = limit{rate, burst}
	f.mu.Unlock()
	err := f.shared.SetLimit(ctx, accountID, rate, burst)
	if failed(err) {
		f.mu.Lock()
		f.stale[accountID] = true
		f.mu.Unlock()
		f.degrade(err)
		return nil
	}
	return err
}

// Tokens implements Limiter: the shared bucket's, or the local share's
// while degraded.
func (f *Fallback) Tokens(ctx context.Context, accountID string) (float64, error) {
	if !f.mode.on() {
		t, err := f.shared.Tokens(ctx, accountID)
		if !failed(err) {
			return t, err
		}
		f.degrade(err)
	}
	return f.local.Tokens(ctx, accountID)
}

// Debit implements Limiter: it charges the local share always, so a
// switch finds it current, and the shared bucket when it answers.
func (f *Fallback) Debit(ctx context.Context, accountID string, n int) error {
	if err := f.local.Debit(ctx, accountID, max(1, int(math.Ceil(float64(n)*f.share)))); err != nil {
		return err
	}
	if f.mode.on() {
		return nil
	}
	if err := f.shared.Debit(ctx, accountID, n); failed(err) {
		f.degrade(err)
	} else if err != nil {
		return err
	}
	return nil
}
