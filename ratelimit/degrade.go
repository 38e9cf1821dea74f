package ratelimit

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
)

// degradedHelp is the help of wamux_ratelimit_degraded, one for every
// part that exports it: gauges of one name must agree on their help.
const degradedHelp = "1 while the shared (Redis) state of the part named by what (limiter, pairs, pause, departures) does not answer and this node keeps it in process."

// degradation is the mode a fallback shares between its callers: whether
// the shared state answers and, while it does not, when to ask it next.
// Its gauge is wamux_ratelimit_degraded{what=…}.
type degradation struct {
	what       string
	probeEvery time.Duration
	clock      wamux.Clock
	log        *slog.Logger
	gauge      prometheus.Gauge

	degraded atomic.Bool

	mu        sync.Mutex
	nextProbe time.Time
}

// newDegradation registers the gauge of what on reg, when reg is set.
func newDegradation(what string, probeEvery time.Duration, clock wamux.Clock, log *slog.Logger, reg prometheus.Registerer) (*degradation, error) {
	if probeEvery <= 0 {
		probeEvery = ProbeEveryDefault
	}
	if clock == nil {
		clock = wamux.SystemClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &degradation{what: what, probeEvery: probeEvery, clock: clock, log: log,
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "wamux_ratelimit_degraded", Help: degradedHelp,
			ConstLabels: prometheus.Labels{"what": what}})}
	if reg != nil {
		if err := reg.Register(d.gauge); err != nil {
			return nil, fmt.Errorf("register %s fallback metrics: %w", what, err)
		}
	}
	return d, nil
}

// on reports whether the node keeps the state in process.
func (d *degradation) on() bool { return d.degraded.Load() }

// askShared reports whether a call should go to the shared state: always
// while it answers, once per probeEvery while it does not.
func (d *degradation) askShared() bool {
	if !d.degraded.Load() {
		return true
	}
	now := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if now.Before(d.nextProbe) {
		return false
	}
	d.nextProbe = now.Add(d.probeEvery)
	return true
}

// fail records that the shared state did not answer; the first failure
// logs msg.
func (d *degradation) fail(err error, msg string, args ...any) {
	d.mu.Lock()
	d.nextProbe = d.clock.Now().Add(d.probeEvery)
	d.mu.Unlock()
	if !d.degraded.Swap(true) {
		d.gauge.Set(1)
		d.log.Warn(msg, append(args, "what", d.what, "err", err)...)
	}
}

// clear records that the shared state answers again, logging msg when it
// did not before.
func (d *degradation) clear(msg string) {
	if d.degraded.Swap(false) {
		d.gauge.Set(0)
		d.log.Info(msg, "what", d.what)
	}
}
