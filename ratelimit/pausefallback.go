package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
)

// AppPauseFallbackConfig configures an AppPauseFallback.
type AppPauseFallbackConfig struct {
	// Shared is the AppPause every node shares (redislimit.AppPause).
	Shared AppPause
	// ProbeEvery is how often, while degraded, a call tries the shared
	// pauses again; ProbeEveryDefault when zero.
	ProbeEvery time.Duration
	// Clock defaults to wamux.SystemClock; the in-process pauses use it.
	Clock wamux.Clock
	// Logger reports each change of mode; none when nil.
	Logger *slog.Logger
	// Registry, when set, gets the gauge
	// wamux_ratelimit_degraded{what="pause"}.
	Registry prometheus.Registerer
}

// AppPauseFallback is an AppPause that uses a shared one and keeps this
// node's pauses in process as well: while the shared one fails (Redis
// unreachable) they are the pauses in force, and a pause set meanwhile is
// published to the shared one when it answers again, so the other nodes
// learn it. A pause in force is the later of the two. Every call while
// degraded is answered in process except one per ProbeEvery, which asks
// the shared pauses and, when they answer, returns to them.
type AppPauseFallback struct {
	shared AppPause
	local  *LocalAppPause
	mode   *degradation
	log    *slog.Logger

	mu      sync.Mutex
	pending map[string]time.Time // pauses the shared one missed, by app
}

var _ AppPause = (*AppPauseFallback)(nil)

// NewAppPauseFallback builds an AppPauseFallback; it starts on the shared
// pauses.
func NewAppPauseFallback(cfg AppPauseFallbackConfig) (*AppPauseFallback, error) {
	if cfg.Shared == nil {
		return nil, errors.New("ratelimit: app pause fallback needs a shared AppPause")
	}
	mode, err := newDegradation("pause", cfg.ProbeEvery, cfg.Clock, cfg.Logger, cfg.Registry)
	if err != nil {
		return nil, err
	}
	return &AppPauseFallback{shared: cfg.Shared, local: NewLocalAppPause(mode.clock), mode: mode,
		log: mode.log, pending: map[string]time.Time{}}, nil
}

// Degraded reports whether the node keeps app pauses on its own.
func (f *AppPauseFallback) Degraded() bool { return f.mode.on() }

// answered reports whether the shared pauses answered (err is their
// answer); a failure degrades, and the first answer after one publishes
// the pauses they missed. A call the caller cancelled says nothing of
// the shared pauses.
func (f *AppPauseFallback) answered(ctx context.Context, err error) bool {
	if err != nil && ctx.Err() != nil {
		return true
	}
	if err != nil {
		f.mode.fail(err, "shared app pauses unreachable: this node keeps its own")
		return false
	}
	if f.mode.on() {
		f.publishPending(ctx)
		f.mode.clear("shared app pauses answer again")
	}
	return true
}

// publishPending gives the shared pauses those set while they failed and
// still in force; one that fails again stays pending.
func (f *AppPauseFallback) publishPending(ctx context.Context) {
	f.mu.Lock()
	todo := f.pending
	f.pending = map[string]time.Time{}
	f.mu.Unlock()
	now := f.mode.clock.Now()
	for app, until := range todo {
		if !until.After(now) {
			continue
		}
		if _, err := f.shared.Pause(ctx, app, until); err != nil {
			f.keep(app, until)
			f.log.Error("publish an app pause set while the shared pauses failed", "app", app, "err", err)
		}
	}
}

// keep records a pause the shared pauses missed.
func (f *AppPauseFallback) keep(app string, until time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if until.After(f.pending[app]) {
		f.pending[app] = until
	}
}

// Pause implements AppPause.
func (f *AppPauseFallback) Pause(ctx context.Context, app string, until time.Time) (time.Time, error) {
	local, _ := f.local.Pause(ctx, app, until)
	if f.mode.askShared() {
		shared, err := f.shared.Pause(ctx, app, until)
		if f.answered(ctx, err) {
			if err != nil {
				return time.Time{}, err
			}
			return later(shared, local), nil
		}
	}
	if until.After(f.mode.clock.Now()) {
		f.keep(app, until)
	}
	return local, nil
}

// PausedUntil implements AppPause.
func (f *AppPauseFallback) PausedUntil(ctx context.Context, app string) (time.Time, error) {
	local, _ := f.local.PausedUntil(ctx, app)
	if f.mode.askShared() {
		shared, err := f.shared.PausedUntil(ctx, app)
		if f.answered(ctx, err) {
			if err != nil {
				return time.Time{}, err
			}
			return later(shared, local), nil
		}
	}
	return local, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
