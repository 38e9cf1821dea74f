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

// Departures books when each account's requests leave for the provider
// (see Pacer): LocalDepartures keeps one schedule per account in process;
// redislimit.Departures keeps it in Redis, so that the nodes an account
// passes between (a handover, a node's last requests while another takes
// over) book on one schedule and never leave more than the account's
// limit in a second between them.
type Departures interface {
	// Reserve books the next departure of accountID's request ready now,
	// at rate (per second) with burst, and returns how long the request
	// waits for it (zero: it leaves at once).
	Reserve(ctx context.Context, accountID string, rate float64, burst int) (time.Duration, error)
}

// LocalDepartures is the in-process Departures: a Pacer per account.
type LocalDepartures struct {
	clock wamux.Clock
	mu    sync.Mutex
	p     map[string]*Pacer
}

var _ Departures = (*LocalDepartures)(nil)

// NewLocalDepartures builds the in-process Departures on clock (nil: the
// system clock).
func NewLocalDepartures(clock wamux.Clock) *LocalDepartures {
	if clock == nil {
		clock = wamux.SystemClock{}
	}
	return &LocalDepartures{clock: clock, p: map[string]*Pacer{}}
}

// Reserve implements Departures.
func (l *LocalDepartures) Reserve(_ context.Context, accountID string, rate float64, burst int) (time.Duration, error) {
	l.mu.Lock()
	p, ok := l.p[accountID]
	if !ok {
		p = &Pacer{}
		l.p[accountID] = p
	}
	l.mu.Unlock()
	now := l.clock.Now()
	return max(p.Reserve(now, rate, burst).Sub(now), 0), nil
}

// DeparturesFallbackConfig configures a DeparturesFallback.
type DeparturesFallbackConfig struct {
	// Shared is the schedule every node shares (redislimit.Departures).
	Shared Departures
	// ProbeEvery is how often, while degraded, a call tries the shared
	// schedule again; ProbeEveryDefault when zero.
	ProbeEvery time.Duration
	// Clock defaults to wamux.SystemClock; the in-process schedules use it.
	Clock wamux.Clock
	// Logger reports each change of mode; none when nil.
	Logger *slog.Logger
	// Registry, when set, gets the gauge
	// wamux_ratelimit_degraded{what="departures"}.
	Registry prometheus.Registerer
}

// DeparturesFallback books on the shared schedule and, while it fails
// (Redis unreachable), on this node's own, which then paces only what
// this node sends: each account has one holder, so that is the account's
// whole traffic but around a handover.
type DeparturesFallback struct {
	shared Departures
	local  *LocalDepartures
	mode   *degradation
}

var _ Departures = (*DeparturesFallback)(nil)

// NewDeparturesFallback builds a DeparturesFallback; it starts on the
// shared schedule.
func NewDeparturesFallback(cfg DeparturesFallbackConfig) (*DeparturesFallback, error) {
	if cfg.Shared == nil {
		return nil, errors.New("ratelimit: departures fallback needs a shared Departures")
	}
	mode, err := newDegradation("departures", cfg.ProbeEvery, cfg.Clock, cfg.Logger, cfg.Registry)
	if err != nil {
		return nil, err
	}
	return &DeparturesFallback{shared: cfg.Shared, local: NewLocalDepartures(mode.clock), mode: mode}, nil
}

// Degraded reports whether the node books on its own schedule.
func (f *DeparturesFallback) Degraded() bool { return f.mode.on() }

// Reserve implements Departures.
func (f *DeparturesFallback) Reserve(ctx context.Context, accountID string, rate float64, burst int) (time.Duration, error) {
	if f.mode.askShared() {
		wait, err := f.shared.Reserve(ctx, accountID, rate, burst)
		if err == nil || ctx.Err() != nil {
			if err == nil && f.mode.on() {
				f.mode.clear("shared departure schedule answers again")
			}
			return wait, err
		}
		f.mode.fail(err, "shared departure schedule unreachable: each account's requests paced by this node alone")
	}
	return f.local.Reserve(ctx, accountID, rate, burst)
}
