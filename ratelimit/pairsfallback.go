package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
)

// PairsFallbackConfig configures a PairsFallback.
type PairsFallbackConfig struct {
	// Shared is the pair limiter every node shares (redislimit.Pairs);
	// its policy is the fallback's.
	Shared Pairs
	// ProbeEvery is how often, while degraded, a call tries the shared
	// limiter again; ProbeEveryDefault when zero.
	ProbeEvery time.Duration
	// Clock defaults to wamux.SystemClock; the in-process pairs use it.
	Clock wamux.Clock
	// Logger reports each change of mode; none when nil.
	Logger *slog.Logger
	// Registry, when set, gets the gauge
	// wamux_ratelimit_degraded{what="pairs"}.
	Registry prometheus.Registerer
}

// PairsFallback is a Pairs that uses a shared pair limiter and, while that
// one fails (Redis unreachable), paces pairs in process with a
// PairLimiter. It records every message of this node in process as well,
// so the switch finds the pairs this node sent to current, and a pair
// waits while either says it owes: what was sent during an outage keeps
// its pair waiting on this node after the shared limiter returns, though
// the shared one never learned it. An account's pairs are paced by the
// node that owns the account, so the in-process view is the pair's whole
// history on that node; a pair sent to by several nodes during an outage
// is paced by each on its own. Every call while degraded is answered in
// process except one per ProbeEvery, which asks the shared limiter and,
// when it answers, returns to it.
type PairsFallback struct {
	shared Pairs
	local  *PairLimiter
	mode   *degradation
}

var _ Pairs = (*PairsFallback)(nil)

// NewPairsFallback builds a PairsFallback; it starts on the shared
// limiter.
func NewPairsFallback(cfg PairsFallbackConfig) (*PairsFallback, error) {
	if cfg.Shared == nil {
		return nil, errors.New("ratelimit: pairs fallback needs a shared pair limiter")
	}
	mode, err := newDegradation("pairs", cfg.ProbeEvery, cfg.Clock, cfg.Logger, cfg.Registry)
	if err != nil {
		return nil, err
	}
	interval, burst := cfg.Shared.Policy()
	local, err := NewPairLimiter(PairConfig{Clock: mode.clock, Interval: interval, Burst: burst})
	if err != nil {
		return nil, err
	}
	return &PairsFallback{shared: cfg.Shared, local: local, mode: mode}, nil
}

// Degraded reports whether the node paces pairs on its own.
func (f *PairsFallback) Degraded() bool { return f.mode.on() }

// answered reports whether the shared limiter answered (err is its
// answer); a failure degrades. A call the caller cancelled says nothing
// of the shared limiter.
func (f *PairsFallback) answered(ctx context.Context, err error) bool {
	if err != nil && ctx.Err() != nil {
		return true
	}
	if err == nil {
		f.mode.clear("shared pair limiter answers again")
		return true
	}
	f.mode.fail(err, "shared pair limiter unreachable: pairs paced by this node alone")
	return false
}

// Wait implements Pairs: the longer of the in-process and shared waits.
func (f *PairsFallback) Wait(ctx context.Context, accountID, recipient string) (time.Duration, error) {
	lw, _ := f.local.Wait(ctx, accountID, recipient)
	if f.mode.askShared() {
		sw, err := f.shared.Wait(ctx, accountID, recipient)
		if f.answered(ctx, err) {
			return max(lw, sw), err
		}
	}
	return lw, nil
}

// Take implements Pairs.
func (f *PairsFallback) Take(ctx context.Context, accountID, recipient string) error {
	_ = f.local.Take(ctx, accountID, recipient)
	if f.mode.askShared() {
		if err := f.shared.Take(ctx, accountID, recipient); f.answered(ctx, err) {
			return err
		}
	}
	return nil
}

// Reserve implements Pairs. A pair that owes in process waits without
// asking the shared limiter, which knows at least as much of this node's
// messages.
func (f *PairsFallback) Reserve(ctx context.Context, accountID, recipient string) (bool, time.Duration, error) {
	if lw, _ := f.local.Wait(ctx, accountID, recipient); lw > 0 {
		return false, lw, nil
	}
	if f.mode.askShared() {
		ok, w, err := f.shared.Reserve(ctx, accountID, recipient)
		if f.answered(ctx, err) {
			if ok {
				_ = f.local.Take(ctx, accountID, recipient)
			}
			return ok, w, err
		}
	}
	return f.local.Reserve(ctx, accountID, recipient)
}

// OnPairLimited implements Pairs.
func (f *PairsFallback) OnPairLimited(ctx context.Context, accountID, recipient string) error {
	_ = f.local.OnPairLimited(ctx, accountID, recipient)
	if f.mode.askShared() {
		if err := f.shared.OnPairLimited(ctx, accountID, recipient); f.answered(ctx, err) {
			return err
		}
	}
	return nil
}

// SetPolicy implements Pairs: both limiters take the policy.
func (f *PairsFallback) SetPolicy(interval time.Duration, burst int) error {
	if err := f.shared.SetPolicy(interval, burst); err != nil {
		return err
	}
	return f.local.SetPolicy(interval, burst)
}

// Policy implements Pairs.
func (f *PairsFallback) Policy() (time.Duration, int) { return f.local.Policy() }
