// Package retention deletes inbound messages once they are older than the
// inbound_retention setting: customers' content and numbers are kept only
// as long as the operator decided.
package retention

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults for Config.
const (
	// EveryDefault is how often a pruning round runs.
	EveryDefault = 5 * time.Minute
	// BatchDefault is how many messages one delete removes; a round
	// deletes batch after batch until one comes back short.
	BatchDefault = 5000
)

// Store is the part of store.Store the pruner uses.
type Store interface {
	PruneInbound(ctx context.Context, before time.Time, limit int) (int, error)
}

// Clock tells the time and waits; fakeclock.Clock is one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Config configures a Pruner; Store, Retention and Registry are required.
type Config struct {
	Store Store
	// Retention is the inbound_retention setting, read at every round so
	// a change applies without a restart.
	Retention func() time.Duration
	Registry  prometheus.Registerer
	Logger    *slog.Logger  // default slog.Default()
	Every     time.Duration // EveryDefault when zero
	Batch     int           // BatchDefault when zero
	Clock     Clock         // the wall clock when nil
}

// Pruner deletes inbound messages received longer than the retention
// period ago, every Config.Every.
type Pruner struct {
	cfg    Config
	pruned prometheus.Counter

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// New builds a Pruner and registers its metric.
func New(cfg Config) (*Pruner, error) {
	if cfg.Store == nil || cfg.Retention == nil || cfg.Registry == nil {
		return nil, errors.New("retention: Store, Retention and Registry are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Every <= 0 {
		cfg.Every = EveryDefault
	}
	if cfg.Batch <= 0 {
		cfg.Batch = BatchDefault
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	p := &Pruner{cfg: cfg, pruned: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "wamux_inbound_pruned_total",
		Help: "Inbound messages deleted after the inbound_retention period.",
	})}
	if err := cfg.Registry.Register(p.pruned); err != nil {
		return nil, err
	}
	return p, nil
}

// Start runs a round now and then every Config.Every until Stop.
func (p *Pruner) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan struct{})
	go p.run(ctx, p.done)
}

// Stop ends the loop, cutting a round short, and returns once it has.
func (p *Pruner) Stop() {
	p.mu.Lock()
	cancel, done := p.cancel, p.done
	p.cancel, p.done = nil, nil
	p.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (p *Pruner) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	for {
		if _, err := p.Prune(ctx); err != nil && ctx.Err() == nil {
			p.cfg.Logger.Warn("retention: prune inbound messages", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-p.cfg.Clock.After(p.cfg.Every):
		}
	}
}

// Prune runs one round: it deletes, batch by batch, the inbound messages
// received before now less the retention period, and reports how many
// went.
func (p *Pruner) Prune(ctx context.Context) (int, error) {
	before := p.cfg.Clock.Now().Add(-p.cfg.Retention())
	total := 0
	for ctx.Err() == nil {
		n, err := p.cfg.Store.PruneInbound(ctx, before, p.cfg.Batch)
		total += n
		p.pruned.Add(float64(n))
		if err != nil {
			return total, err
		}
		if n < p.cfg.Batch {
			break
		}
	}
	if total > 0 {
		p.cfg.Logger.Info("retention: inbound messages deleted", "messages", total, "received_before", before)
	}
	return total, ctx.Err()
}
