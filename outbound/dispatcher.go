package outbound

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/ownership"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/store"
)

// Provider sends one message and classifies the outcome; it never retries
// by itself (the dispatcher owns the one retry loop). *cloudapi.Client
// implements it.
type Provider interface {
	Send(ctx context.Context, dest cloudapi.Destination, msg wamux.Message) cloudapi.Result
}

// timerClock is a Clock that also runs functions once a duration has
// passed on it. The evacuator times its own wake-ups on such a clock, so
// a test that moves it wakes them too.
type timerClock interface {
	wamux.Clock
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// MaxInflightDefault is the least number of provider calls an account may
// have running; an account whose rate and provider latency need more
// may have more (see inflightBound), up to MaxInflightCap.
const MaxInflightDefault = 64

// Config builds a Dispatcher. Store, Provider, Settings, Logger and
// Registry are required.
type Config struct {
	Store    store.Store
	Provider Provider
	Settings *settings.Manager
	Logger   *slog.Logger
	Registry prometheus.Registerer
	// Clock defaults to the wall clock; the limiters and reorder buffers
	// use it too, so a test can move them all.
	Clock wamux.Clock
	// MaxInflight is the least number of concurrent provider calls an
	// account may have; one whose rate and provider latency need more
	// may have twice rate × latency, up to MaxInflightCap.
	MaxInflight int
	// Pairs paces recipients; nil builds an in-process
	// ratelimit.PairLimiter. The dispatcher sets its policy from the
	// settings pair_interval and pair_burst.
	Pairs ratelimit.Pairs
	// Limiter holds the accounts' token buckets (redislimit behind a
	// ratelimit.Fallback in a cluster); nil builds an in-process
	// ratelimit.Local. The dispatcher makes it adaptive (cooldowns,
	// throttles) and sets each account's limit on it.
	Limiter ratelimit.Limiter
	// AppPause shares the pauses of whole Meta apps (code 4) between
	// nodes (redislimit.AppPause behind a ratelimit.AppPauseFallback in a
	// cluster): a code 4 pauses the app there, and every worker cools its
	// account down while its app is paused. nil: a code 4 pauses the
	// app's accounts on this node only.
	AppPause ratelimit.AppPause
	// Departures books when each request leaves (redislimit.Departures
	// behind a ratelimit.DeparturesFallback in a cluster, so that nodes
	// handing an account over share its schedule); nil builds an
	// in-process ratelimit.LocalDepartures.
	Departures ratelimit.Departures
	// Ownership says which accounts this node works on: only the
	// accounts of held partitions have a worker here (queue, reorder
	// buffer, sends), started when Watch tells a partition is assigned
	// and stopped when it is revoked, and every message update a worker
	// writes carries the account's lease as its fence. nil: every
	// account, unfenced.
	Ownership ownership.Ownership
	// RevokeDrain bounds how long a revoke waits for the provider calls
	// of the partition's accounts to end and be recorded; a call still
	// open then is abandoned: its message stays sending, for the next
	// holder to treat as of unknown outcome. 0: RevokeDrainDefault.
	RevokeDrain time.Duration
	// ReloadInterval is how often, with an Ownership, the dispatcher
	// looks in the store for what reached it without this node: held
	// accounts created elsewhere, and messages submitted through other
	// nodes, which store them and queue nothing (see Reload). 0: only
	// when Reload is called.
	ReloadInterval time.Duration
}

// RevokeDrainDefault is the RevokeDrain when none is given.
const RevokeDrainDefault = 10 * time.Second

// Dispatcher takes admitted messages to the provider: reorder buffer,
// routing, per-account queues, limits, the retry loop and compensation of
// unknown outcomes.
type Dispatcher struct {
	store    store.Store
	provider Provider
	settings *settings.Manager
	log      *slog.Logger
	clock    wamux.Clock
	timers   timerClock // clock, or the wall clock for one that runs no timers
	metrics  *metrics
	admit    *admission
	limiter  *ratelimit.Adaptive
	pairs    ratelimit.Pairs
	appPause appPauses
	depart   ratelimit.Departures
	own      ownership.Ownership
	unwatch  func() // ends the watch of own (Start)
	maxIn    int
	// throttles logs the provider's throttle answers.
	throttles throttleLog
	// revokeDrain and reloadEvery are Config.RevokeDrain and
	// ReloadInterval; reloads wakes the reloader (Reload).
	revokeDrain time.Duration
	reloadEvery time.Duration
	reloads     chan struct{}

	// Lock order: routeMu, then mu, then a worker's mu. A worker's
	// cooldownMu is taken with none of them held.
	routeMu sync.Mutex // one routing decision at a time: first messages to one recipient agree
	// transit counts, per recipient, the messages routed by a Submit that
	// has not yet handed them to their worker (guarded by routeMu): an
	// evacuation must not move the recipient meanwhile (rehome).
	transit map[string]int
	// held lists recipients an evacuation skipped for a message in
	// transit (guarded by routeMu): their arrival wakes the evacuators.
	held map[string]bool
	// owed holds owner changes whose store write failed after the
	// recipient's messages had moved (guarded by routeMu): see recordOwner.
	owed map[string]owedOwner

	progress atomic.Pointer[ReceiptProgress]

	mu       sync.Mutex
	running  bool
	ctx      context.Context // cancelled on Stop: no new sends
	cancel   context.CancelFunc
	sendCtx  context.Context // cancelled when Stop's bound runs out: abandon provider calls
	abandon  context.CancelFunc
	workers  map[string]*worker
	wg       sync.WaitGroup
	accounts map[string]wamux.Account
}

// New builds a Dispatcher; nothing runs until Start.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Store == nil || cfg.Provider == nil || cfg.Settings == nil || cfg.Logger == nil || cfg.Registry == nil {
		return nil, errors.New("outbound: Store, Provider, Settings, Logger and Registry are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = MaxInflightDefault
	}
	m, err := newMetrics(cfg.Registry)
	if err != nil {
		return nil, err
	}
	s := cfg.Settings.Current()
	buckets := cfg.Limiter
	if buckets == nil {
		local, err := ratelimit.NewLocal(ratelimit.LocalConfig{Clock: cfg.Clock})
		if err != nil {
			return nil, fmt.Errorf("outbound: limiter: %w", err)
		}
		buckets = local
	}
	adaptive, err := ratelimit.NewAdaptive(buckets, ratelimit.AdaptiveConfig{Clock: cfg.Clock, CooldownMin: s.CooldownMin, CooldownMax: s.CooldownMax})
	if err != nil {
		return nil, fmt.Errorf("outbound: adaptive limiter: %w", err)
	}
	pairs := cfg.Pairs
	if pairs == nil {
		pairs, err = ratelimit.NewPairLimiter(ratelimit.PairConfig{Clock: cfg.Clock, Interval: s.PairInterval, Burst: s.PairBurst})
	} else {
		err = pairs.SetPolicy(s.PairInterval, s.PairBurst)
	}
	if err != nil {
		return nil, fmt.Errorf("outbound: pair limiter: %w", err)
	}
	if cfg.RevokeDrain <= 0 {
		cfg.RevokeDrain = RevokeDrainDefault
	}
	d := &Dispatcher{
		own:      cfg.Ownership,
		store:    cfg.Store,
		provider: cfg.Provider,
		settings: cfg.Settings,
		log:      cfg.Logger,
		clock:    cfg.Clock,
		timers:   systemClock{},
		metrics:  m,
		admit:    newAdmission(),
		limiter:  adaptive,
		pairs:    pairs,
		appPause: appPauses{shared: cfg.AppPause, seen: make(map[string]appPauseRead)},
		depart:   cfg.Departures,
		maxIn:    cfg.MaxInflight,
		workers:  make(map[string]*worker),
		accounts: make(map[string]wamux.Account),
		transit:  make(map[string]int),
		held:     make(map[string]bool),
		owed:     make(map[string]owedOwner),
		reloads:  make(chan struct{}, 1),
	}
	d.revokeDrain, d.reloadEvery = cfg.RevokeDrain, cfg.ReloadInterval
	if d.depart == nil {
		d.depart = ratelimit.NewLocalDepartures(cfg.Clock)
	}
	if tc, ok := cfg.Clock.(timerClock); ok {
		d.timers = tc
	}
	if err := cfg.Registry.Register(newLimitCollector(d)); err != nil {
		return nil, fmt.Errorf("register outbound metrics: %w", err)
	}
	cfg.Settings.OnChange(d.settingsChanged)
	return d, nil
}

// ChargeInbound charges the account's rate for n messages users sent to its
// number just now: Meta counts them against the same per-number throughput
// as our sends (reference §3), so each costs a send. The bucket may go
// below zero, by at most ratelimit.MaxDebt of refill; the worker sees the
// longer wait at its next reservation. It is receipts.Config.OnInbound.
func (d *Dispatcher) ChargeInbound(ctx context.Context, accountID string, n int) error {
	if err := d.limiter.Debit(ctx, accountID, n); err != nil {
		return fmt.Errorf("outbound: charge %d inbound messages: %w", n, err)
	}
	return nil
}

// settingsChanged pushes new limits to the limiters and wakes every worker
// so timeouts and bounds apply at once.
func (d *Dispatcher) settingsChanged(old, next settings.Values) {
	if old.CooldownMin != next.CooldownMin || old.CooldownMax != next.CooldownMax {
		if err := d.limiter.SetCooldown(next.CooldownMin, next.CooldownMax); err != nil {
			d.log.Error("apply cooldown settings", "err", err)
		}
	}
	if old.PairInterval != next.PairInterval || old.PairBurst != next.PairBurst {
		if err := d.pairs.SetPolicy(next.PairInterval, next.PairBurst); err != nil {
			d.log.Error("apply pair settings", "err", err)
		}
	}
	d.kickAll()
}

// Start recovers the state a previous process left and starts one worker
// per account (with an Ownership: per account of a held partition).
// Messages found in status sending were with the provider when that
// process died: their outcome is unknown, so they go to compensation,
// never straight to a resend.
func (d *Dispatcher) Start(ctx context.Context) (err error) {
	// No recipient is routed before repairOwners has run.
	d.routeMu.Lock()
	defer d.routeMu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running {
		return errors.New("outbound: already started")
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.sendCtx, d.abandon = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			d.cancel()
			if d.unwatch != nil {
				d.unwatch()
			}
		}
	}()
	if d.own != nil {
		// Watched before the leases are read: a change after the read
		// is told after it, and its call waits for mu, so for Start to
		// have run. The first call tells the partitions held now, whose
		// workers Start has started already (takeUp skips them).
		d.unwatch = d.own.Watch(d.ownershipChanged)
	}
	accounts, err := d.store.ListAccounts(ctx)
	if err != nil {
		return fmt.Errorf("outbound: load accounts: %w", err)
	}
	if d.own == nil {
		if err := d.sweepSending(ctx, nil); err != nil {
			return err
		}
	}
	var held []wamux.Account
	for _, a := range accounts {
		d.accounts[a.ID] = a
		if d.own == nil {
			if err := d.startWorker(ctx, a, ownership.Lease{}); err != nil {
				return err
			}
			continue
		}
		if _, ok := d.own.Lease(a.ID); ok {
			held = append(held, a)
		}
	}
	if err := d.startHeld(ctx, held); err != nil {
		return err
	}
	if err := d.repairOwners(ctx); err != nil {
		return err
	}
	if d.own != nil {
		d.wg.Add(1)
		go d.reloader(d.ctx)
	}
	d.running = true
	return nil
}

// unknownAtStop is the last_error of a message found sending by the
// worker that takes its account up.
const unknownAtStop = "outcome unknown: the gateway stopped during the provider call"

// sweepSending makes the messages in status sending unknown: every one
// (only is nil) or those of the account only names, under its worker's
// fence. Their provider call was cut by a stop, or is still open on
// another node that lost the account (the fence refuses its outcome
// then), so compensation decides them.
func (d *Dispatcher) sweepSending(ctx context.Context, only *worker) error {
	f := store.MessageFilter{Statuses: []wamux.Status{wamux.StatusSending}, Limit: 1 << 30}
	if only != nil {
		f.AccountID = only.id
	}
	sending, err := d.store.ListMessages(ctx, f)
	if err != nil {
		return fmt.Errorf("outbound: load in-flight messages: %w", err)
	}
	lastErr := unknownAtStop
	for _, m := range sending {
		u := store.MessageUpdate{MsgID: m.ID, From: []wamux.Status{wamux.StatusSending}, Status: wamux.StatusUnknown, LastError: &lastErr}
		if only != nil {
			_, err = only.update(ctx, u)
		} else {
			_, err = d.store.UpdateMessage(ctx, u)
		}
		if err != nil {
			return fmt.Errorf("outbound: mark %s unknown: %w", m.ID, err)
		}
	}
	if len(sending) > 0 {
		d.log.Warn("messages in flight at the last stop are now unknown and go to compensation", "count", len(sending), "account_id", f.AccountID)
	}
	return nil
}

// startHeld starts the workers of accounts this node holds, each under
// the account's lease as Ownership tells it now, after sweeping its
// messages left sending (sweepSending). An account whose lease is refused
// meanwhile (another node took its partition) is left out: the lease is
// dropped (Ownership.Fenced). The caller holds routeMu and mu.
func (d *Dispatcher) startHeld(ctx context.Context, accounts []wamux.Account) error {
	for _, a := range accounts {
		lease, ok := d.own.Lease(a.ID)
		if !ok {
			continue
		}
		if err := d.startWorker(ctx, a, lease); err != nil {
			if errors.Is(err, store.ErrFenced) {
				continue
			}
			return err
		}
	}
	return nil
}

// kickAll wakes every worker.
func (d *Dispatcher) kickAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, w := range d.workers {
		w.kick()
	}
}

// ownershipChanged follows a change of the partitions this node holds
// (the Ownership's Watch).
func (d *Dispatcher) ownershipChanged(c ownership.Change) {
	if len(c.Revoked) > 0 {
		d.giveUp(c.Revoked)
	}
	if len(c.Assigned) > 0 {
		d.takeUp()
	}
}

// giveUp stops the workers of the revoked partitions' accounts: they take
// no new work at once, and leave this node's memory (queues, reorder
// buffers, routing); what they hold is in the store for the next holder.
// It returns once their provider calls have ended and been recorded, or
// once RevokeDrain has passed: a call still open then is abandoned, its
// message left sending, as a crash would leave it, which the next
// holder's start of the account makes unknown and compensates.
func (d *Dispatcher) giveUp(revoked []ownership.Lease) {
	d.routeMu.Lock()
	d.mu.Lock()
	var leaving []*worker
	for id, w := range d.workers {
		for _, l := range revoked {
			if w.lease.Partition == l.Partition {
				w.revoked.Store(true)
				w.cancel()
				delete(d.workers, id)
				leaving = append(leaving, w)
				break
			}
		}
	}
	d.routeMu.Unlock()
	d.mu.Unlock()
	if len(leaving) == 0 {
		return
	}
	timeout := make(chan struct{})
	stop := d.timers.AfterFunc(d.revokeDrain, func() { close(timeout) })
	defer stop()
	for _, w := range leaving {
		select {
		case <-w.exited:
			continue
		case <-timeout:
		}
		w.abandoned.Store(true)
		d.log.Warn("partition revoked with provider calls still open; their messages stay sending for the next holder to compensate",
			"account_id", w.id, "partition", w.lease.Partition, "drain", d.revokeDrain)
	}
	d.log.Info("partitions revoked; their accounts' work stopped here", "leases", revoked, "accounts", len(leaving))
}

// forgetWorker removes the gauges of a revoked worker's account once it
// has stopped, unless the account has a worker again.
func (d *Dispatcher) forgetWorker(w *worker) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, again := d.workers[w.id]; !again {
		d.metrics.forget(w.id)
	}
}

// takeUp starts a worker for every account of a held partition that has
// none: after an assignment, and whenever the reloader looks (an account
// created elsewhere, a start that failed). Accounts are read again from
// the store, where another node may have created or changed them.
func (d *Dispatcher) takeUp() {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	accounts, err := d.store.ListAccounts(ctx)
	if err != nil {
		d.log.Error("take up held partitions: load accounts", "err", err)
		return
	}
	d.routeMu.Lock()
	defer d.routeMu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.running {
		return
	}
	var start []wamux.Account
	for _, a := range accounts {
		if _, ok := d.own.Lease(a.ID); !ok {
			if _, known := d.accounts[a.ID]; !known {
				d.accounts[a.ID] = a // for routing
			}
			continue
		}
		if _, ok := d.workers[a.ID]; !ok {
			d.accounts[a.ID] = a
			start = append(start, a)
		}
	}
	if len(start) == 0 {
		return
	}
	if err := d.startHeld(ctx, start); err != nil {
		d.log.Error("take up held partitions", "err", err)
	}
	if err := d.repairOwners(ctx); err != nil {
		d.log.Error("take up held partitions", "err", err)
	}
	d.log.Info("accounts of held partitions taken up", "accounts", len(start))
}

// Reload asks the dispatcher to look in the store for what reached it
// without this node: with an Ownership, each held account's messages
// submitted through other nodes (they store a message for an account
// they do not hold and queue it nowhere), released or moved there, and
// held accounts created elsewhere. It returns at once; the workers look
// at their next round. Without an Ownership it does nothing. It also
// runs every ReloadInterval.
func (d *Dispatcher) Reload() {
	select {
	case d.reloads <- struct{}{}:
	default:
	}
}

// ReloadAccount is Reload for one account, as an announcement that
// another node stored messages for it asks: its worker looks at its next
// round. An account this node does not hold is left to its holder; a held
// one without a worker (created elsewhere) is taken up by a whole Reload.
func (d *Dispatcher) ReloadAccount(accountID string) {
	if d.own == nil {
		return
	}
	if _, held := d.own.Lease(accountID); !held {
		return
	}
	w, ok := d.worker(accountID)
	if !ok {
		d.Reload()
		return
	}
	w.reload.Store(true)
	w.kick()
}

// reloader runs Reload's requests until ctx ends.
func (d *Dispatcher) reloader(ctx context.Context) {
	defer d.wg.Done()
	stop := func() bool { return false }
	defer func() { stop() }()
	if d.reloadEvery > 0 {
		stop = d.timers.AfterFunc(d.reloadEvery, d.Reload)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.reloads:
		}
		stop()
		d.takeUp()
		d.mu.Lock()
		for _, w := range d.workers {
			w.reload.Store(true)
			w.kick()
		}
		d.mu.Unlock()
		if d.reloadEvery > 0 {
			stop = d.timers.AfterFunc(d.reloadEvery, d.Reload)
		}
	}
}

// repairOwners makes the account holding a recipient's routed messages its
// owner where the store says otherwise. A recipient that moves has its
// messages stored under the new account first and its owner after
// (recordOwner); a process that died in between, or whose owner write kept
// failing, left the old owner recorded, and the recipient's next message
// would go out from there before the moved ones. A recipient whose routed
// messages are spread over several accounts (a failed move that could not
// be undone) is left as it is and logged. The caller holds routeMu and mu,
// and the workers have restored their queues.
func (d *Dispatcher) repairOwners(ctx context.Context) error {
	places := map[string][]string{} // recipient → accounts holding its routed messages
	for id, w := range d.workers {
		for _, to := range w.restoredTos {
			places[to] = append(places[to], id)
		}
		w.restoredTos = nil
	}
	tos := make([]string, 0, len(places))
	for to := range places {
		tos = append(tos, to)
	}
	sort.Strings(tos)
	for _, to := range tos {
		accs := places[to]
		if len(accs) > 1 {
			sort.Strings(accs)
			d.log.Warn("a recipient's queued messages are on several accounts; each sends its own", "accounts", accs)
			continue
		}
		owner, err := d.ownerOf(ctx, to)
		if err != nil {
			return err
		}
		if owner == accs[0] {
			continue
		}
		if err := d.store.SetOwner(ctx, to, accs[0], "restored"); err != nil {
			return fmt.Errorf("outbound: repair the owner of a recipient: %w", err)
		}
		d.metrics.reroutes.WithLabelValues("restored").Inc()
		d.log.Warn("recipient's owner set to the account holding its queued messages", "account_id", accs[0], "previous_owner", owner)
	}
	return nil
}

// startWorker restores one account's queue and reorder buffer and starts
// its goroutines, under lease with an Ownership, whose messages left
// sending it sweeps first. The caller holds d.mu.
func (d *Dispatcher) startWorker(ctx context.Context, a wamux.Account, lease ownership.Lease) error {
	if err := d.setLimit(ctx, a); err != nil {
		return err
	}
	if !a.CooldownUntil.IsZero() {
		d.limiter.CoolDown(a.ID, a.CooldownUntil)
	}
	w := newWorker(d, a, lease)
	if d.own != nil {
		if err := d.sweepSending(ctx, w); err != nil {
			return fmt.Errorf("outbound: take up account %s: %w", a.ID, err)
		}
	}
	if err := w.restore(ctx); err != nil {
		return fmt.Errorf("outbound: restore account %s: %w", a.ID, err)
	}
	d.workers[a.ID] = w
	var wctx context.Context
	wctx, w.cancel = context.WithCancel(d.ctx)
	d.wg.Add(2)
	go w.run(wctx)
	go w.evacuator(wctx)
	if a.State == wamux.AccountDisabled {
		w.requestEvacuation()
	}
	return nil
}

// setLimit gives the limiter the account's rate and burst, brought within
// its bounds, the rate less ratelimit.Headroom: rate_per_sec is the
// provider's limit for the number, which the arrivals of requests sent at
// exactly that rate would exceed in some seconds. A limit outside the
// bounds was stored before the API checked them: refusing it would keep
// every account from starting, and an account from taking any other change
// (a disable, a new token) made since.
func (d *Dispatcher) setLimit(ctx context.Context, a wamux.Account) error {
	rate, burst := limitFor(a)
	if rate != a.RatePerSec || burst != a.Burst {
		d.log.Warn("account's stored limit is outside the limiter's bounds; sending at the nearest one until it is changed",
			"account_id", a.ID, "rate_per_sec", a.RatePerSec, "burst", a.Burst, "using_rate", rate, "using_burst", burst)
	}
	if err := d.limiter.SetLimit(ctx, a.ID, max(ratelimit.PaceRate(rate), ratelimit.MinLimitRate), burst); err != nil {
		return fmt.Errorf("outbound: limit for %s: %w", a.ID, err)
	}
	return nil
}

// limitFor is the account's rate and burst brought within the limiter's
// bounds (a NaN rate is taken as the lowest).
func limitFor(a wamux.Account) (float64, int) {
	rate := a.RatePerSec
	if math.IsNaN(rate) || rate < ratelimit.MinLimitRate {
		rate = ratelimit.MinLimitRate
	}
	return min(rate, ratelimit.MaxLimitRate), min(max(a.Burst, 1), ratelimit.MaxBurst)
}

// Stop stops new sends and waits for the provider calls in flight to end
// and be recorded, until ctx ends; calls still open then are abandoned and
// stay in status sending, which the next Start turns into unknown.
func (d *Dispatcher) Stop(ctx context.Context) error {
	d.mu.Lock()
	if !d.running {
		d.mu.Unlock()
		return nil
	}
	d.running = false
	d.cancel()
	if d.unwatch != nil {
		d.unwatch()
	}
	d.mu.Unlock()
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
		d.abandon()
		return nil
	case <-ctx.Done():
		d.abandon()
		<-done
		return fmt.Errorf("outbound: drain cut short: %w", ctx.Err())
	}
}

// AccountChanged tells the dispatcher an account was created or changed
// (PATCH): limits apply to the next send, a new account gets a worker. It
// never ends a running cooldown: a is read from the store, which may not
// have a cooldown the limiter has just started yet. AccountReactivated
// ends one.
//
// A future cooldown_until (PATCH state=cooldown) goes to the limiter,
// which keeps the later of it and a running cooldown; the limiter's end is
// then written back under the worker's cooldownMu (storeCooldown), so the
// last cooldown write to the store carries the longer end whatever the
// order of a throttle's write and this one.
func (d *Dispatcher) AccountChanged(ctx context.Context, a wamux.Account) error {
	w, err := d.applyAccount(ctx, a)
	if err != nil || w == nil {
		return err
	}
	if err := w.storeCooldown("set by an operator"); err != nil {
		return fmt.Errorf("outbound: store the cooldown of account %s: %w", a.ID, err)
	}
	return nil
}

// applyAccount is AccountChanged under d.mu. It returns the account's
// worker when it applied a cooldown to it, which the caller stores.
func (d *Dispatcher) applyAccount(ctx context.Context, a wamux.Account) (*worker, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.accounts[a.ID] = a
	w, ok := d.workers[a.ID]
	if !ok {
		if !d.running {
			return nil, nil
		}
		lease, held := ownership.Lease{}, true
		if d.own != nil {
			// An account of a partition another node holds is
			// worked on there, which takes it up at its next reload.
			lease, held = d.own.Lease(a.ID)
		}
		if !held {
			return nil, nil
		}
		if err := d.startWorker(ctx, a, lease); err != nil {
			return nil, err
		}
		if d.usable(a) {
			d.wakeDisabled()
		}
		return nil, nil
	}
	if err := d.setLimit(ctx, a); err != nil {
		return nil, err
	}
	cooled := a.CooldownUntil.After(d.clock.Now())
	if cooled {
		// PATCH state=cooldown stores when the pause ends; the limiter
		// holds the account until then (it never shortens a longer one).
		d.limiter.CoolDown(a.ID, a.CooldownUntil)
	}
	w.setAccount(a)
	if d.usable(a) {
		d.wakeDisabled()
	}
	if !cooled {
		return nil, nil
	}
	return w, nil
}

// AccountReactivated is AccountChanged for an operator's PATCH
// state=active, which has cleared cooldown_until in the store: it ends the
// limiter's cooldown too, so the account sends again at once, and keeps
// the store cleared (endCooldown). The cooldown ends first, so that an
// account coming back from disabled is seen usable by AccountChanged.
func (d *Dispatcher) AccountReactivated(ctx context.Context, a wamux.Account) error {
	endErr := d.endCooldown(ctx, a.ID)
	return errors.Join(endErr, d.AccountChanged(ctx, a))
}

// endCooldown ends the account's cooldown in the limiter and clears
// cooldown_until in the store, both under the worker's cooldownMu: a
// cooldown write in flight lands before the clear, and one after it is a
// pause the limiter started after the end, which stays. The clear
// outlives the request's cancellation: the PATCH is stored already.
func (d *Dispatcher) endCooldown(ctx context.Context, accountID string) error {
	w, ok := d.worker(accountID)
	if !ok {
		// No worker, no cooldown write for the account.
		d.limiter.EndCooldown(accountID)
		return nil
	}
	w.cooldownMu.Lock()
	defer w.cooldownMu.Unlock()
	d.limiter.EndCooldown(accountID)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	var zero time.Time
	if _, err := d.store.UpdateAccount(ctx, accountID, store.AccountPatch{CooldownUntil: &zero}); err != nil {
		return fmt.Errorf("outbound: clear the ended cooldown of account %s: %w", accountID, err)
	}
	return nil
}

// wakeDisabled asks every disabled account to move its routed recipients:
// an account just became usable. The caller holds d.mu.
func (d *Dispatcher) wakeDisabled() {
	for id, w := range d.workers {
		if d.accounts[id].State == wamux.AccountDisabled {
			w.requestEvacuation()
		}
	}
}

func (d *Dispatcher) worker(accountID string) (*worker, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	w, ok := d.workers[accountID]
	return w, ok
}

// account returns the dispatcher's copy of an account, falling back to the
// store for one created elsewhere.
func (d *Dispatcher) account(ctx context.Context, id string) (wamux.Account, error) {
	d.mu.Lock()
	a, ok := d.accounts[id]
	d.mu.Unlock()
	if ok {
		return a, nil
	}
	a, err := d.store.GetAccount(ctx, id)
	if wamux.ErrorCode(err) == wamux.ENotFound {
		return a, wamux.Errorf(wamux.EInvalid, "unknown account_id %q", id)
	}
	if err != nil {
		return a, err
	}
	if err := d.AccountChanged(ctx, a); err != nil {
		return a, err
	}
	return a, nil
}

// SubmitResult is the outcome for one submitted message.
type SubmitResult struct {
	Message   wamux.Message // as stored (for a duplicate: the stored one)
	Duplicate bool
	Err       error // EInvalid, EConflict, …; nil on success
}

// Submit stores admitted messages durably and hands the new ones to their
// account workers. Results are in input order; one message's error does
// not fail the others. The error return is for the store failing as a
// whole, in which case nothing was acknowledged.
func (d *Dispatcher) Submit(ctx context.Context, msgs []wamux.Message) ([]SubmitResult, error) {
	results := make([]SubmitResult, len(msgs))
	b := d.routeBatch(ctx, msgs, results)
	defer func() { d.arrived(b.routedTo) }()
	taken, err := d.admitBatch(ctx, &b, results)
	if err != nil {
		return nil, err
	}
	defer d.releaseAdmitted(taken)
	if len(b.toInsert) == 0 {
		return results, nil
	}
	ins, err := d.store.InsertMessages(ctx, b.toInsert)
	if err != nil {
		return nil, fmt.Errorf("outbound: store messages: %w", err)
	}
	now := d.clock.Now()
	var fresh []wamux.Message
	for j, r := range ins {
		i := b.idx[j]
		switch r.Outcome {
		case store.Inserted:
			m := b.toInsert[j]
			m.CreatedAt, m.UpdatedAt = now, now
			results[i].Message = m
			fresh = append(fresh, m)
			d.metrics.submitted.WithLabelValues(m.Priority.String()).Inc()
		case store.Duplicate:
			results[i].Message, results[i].Duplicate = *r.Existing, true
			d.metrics.duplicates.Inc()
		case store.Conflict:
			results[i].Err = conflictError(b.toInsert[j], r.Existing)
		}
	}
	// A message of an account this node does not hold (with an
	// Ownership) has no worker here: it is stored only, and its account's
	// holder finds it in the store at its next reload (Reload,
	// ReloadInterval).
	for _, m := range fresh {
		if w, ok := d.worker(m.AccountID); ok {
			w.submit(m)
		}
	}
	return results, nil
}

// routedBatch is a batch with an account for each message to store.
type routedBatch struct {
	toInsert []wamux.Message
	idx      []int    // toInsert[j] is msgs[idx[j]]
	routedTo []string // recipients of the messages route counted in transit
}

// routeBatch gives each message an account (the client's, or route's)
// and answers in results the ones that need no insert: an error, or a
// msg_id already stored. The caller ends the transit of routedTo.
func (d *Dispatcher) routeBatch(ctx context.Context, msgs []wamux.Message, results []SubmitResult) routedBatch {
	var b routedBatch
	planned := map[string]int{}      // messages of this batch per account, not yet charged
	routedIDs := map[string]string{} // msg_id → account, for repeats inside the batch
	stored, lookupErr := d.storedForRouting(ctx, msgs)
	for i, m := range msgs {
		if m.AccountID != "" {
			if _, err := d.account(ctx, m.AccountID); err != nil {
				results[i].Err = err
				continue
			}
		}
		routed := m
		if routed.AccountID == "" {
			if acc, ok := routedIDs[m.ID]; ok {
				// The store finds it a duplicate or a conflict; it
				// takes no routing and no share of the plan.
				routed.AccountID = acc
				b.toInsert, b.idx = append(b.toInsert, routed), append(b.idx, i)
				continue
			}
			if res, ok := d.storedResult(m, stored, lookupErr); ok {
				results[i] = res
				continue
			}
			acc, err := d.route(ctx, m.To, planned)
			if err != nil {
				results[i].Err = err
				continue
			}
			b.routedTo = append(b.routedTo, m.To)
			routed.AccountID = acc
			routedIDs[m.ID] = acc
		}
		planned[routed.AccountID]++
		b.toInsert, b.idx = append(b.toInsert, routed), append(b.idx, i)
	}
	return b
}

// arrived ends the transit of routed messages (route counted them): they
// are in their worker's inbox, or were not stored. When an evacuation
// skipped one of their recipients meanwhile, the evacuators look again;
// otherwise nothing is woken (a Submit does not rescan disabled accounts).
func (d *Dispatcher) arrived(tos []string) {
	if len(tos) == 0 {
		return
	}
	wake := false
	d.routeMu.Lock()
	for _, to := range tos {
		if d.transit[to]--; d.transit[to] <= 0 {
			delete(d.transit, to)
			if d.held[to] {
				delete(d.held, to)
				wake = true
			}
		}
	}
	d.routeMu.Unlock()
	if wake {
		d.mu.Lock()
		d.wakeDisabled()
		d.mu.Unlock()
	}
}

// storedForRouting looks up, in one store read for the whole batch, the
// msg_ids of the messages that need routing (no account_id). Messages with
// an account_id are not looked up: routing cannot change for them, and the
// store's insert tells their duplicates and conflicts apart.
func (d *Dispatcher) storedForRouting(ctx context.Context, msgs []wamux.Message) (map[string]wamux.Message, error) {
	var ids []string
	seen := map[string]bool{}
	for _, m := range msgs {
		if m.AccountID == "" && !seen[m.ID] {
			seen[m.ID] = true
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	found, err := d.store.FindMessages(ctx, nil, ids)
	if err != nil {
		return nil, fmt.Errorf("outbound: look up msg_id: %w", err)
	}
	stored := make(map[string]wamux.Message, len(found))
	for _, m := range found {
		stored[m.ID] = m
	}
	return stored, nil
}

// storedResult answers a message that needs routing whose msg_id is
// already stored: a client's retry. It is looked up before routing because
// routing it again would change what a retry must leave alone: the
// recipient's owner (moved off an account that went out of service since),
// the recorded moves and the batch's plan. ok is false when the msg_id is
// new; a failed lookup (lookupErr) is that message's error.
func (d *Dispatcher) storedResult(m wamux.Message, stored map[string]wamux.Message, lookupErr error) (SubmitResult, bool) {
	if lookupErr != nil {
		return SubmitResult{Err: lookupErr}, true
	}
	existing, ok := stored[m.ID]
	if !ok {
		return SubmitResult{}, false
	}
	if r := store.Blocked(m, existing, true); r.Outcome == store.Conflict {
		return SubmitResult{Err: conflictError(m, r.Existing)}, true
	}
	d.metrics.duplicates.Inc()
	return SubmitResult{Message: existing, Duplicate: true}, true
}

func conflictError(m wamux.Message, existing *wamux.Message) error {
	if existing != nil && existing.ID != m.ID {
		return wamux.Errorf(wamux.EConflict, "client_seq %d of account %s is already taken by msg_id %s", m.ClientSeq, m.AccountID, existing.ID)
	}
	return wamux.Errorf(wamux.EConflict, "msg_id %s already exists with other content", m.ID)
}

// Release sends a held message after all (the operator accepts it goes out
// of order); Drop gives it up.
func (d *Dispatcher) Release(ctx context.Context, msgID string) (wamux.Message, error) {
	return d.decideHeld(ctx, msgID, wamux.StatusQueued)
}

// Drop gives up a held message.
func (d *Dispatcher) Drop(ctx context.Context, msgID string) (wamux.Message, error) {
	return d.decideHeld(ctx, msgID, wamux.StatusDropped)
}

func (d *Dispatcher) decideHeld(ctx context.Context, msgID string, to wamux.Status) (wamux.Message, error) {
	m, err := d.store.GetMessage(ctx, msgID)
	if err != nil {
		return m, err
	}
	u := store.MessageUpdate{MsgID: msgID, From: []wamux.Status{wamux.StatusHeld}, Status: to}
	var ok bool
	if w, held := d.worker(m.AccountID); held {
		ok, err = w.update(ctx, u)
	} else {
		// No worker here (with an Ownership: another node holds the
		// account). A held message is worked on by no node, so the
		// change from held decides alone; a released one is found
		// queued in the store by the holder's next reload.
		ok, err = d.store.UpdateMessage(ctx, u)
	}
	if err != nil {
		return m, err
	}
	if !ok {
		return m, wamux.Errorf(wamux.EConflict, "message %s is %s, not held", msgID, m.Status)
	}
	m.Status = to
	if to == wamux.StatusQueued {
		if w, ok := d.worker(m.AccountID); ok {
			w.enqueueReleased([]wamux.Message{m})
		}
	}
	return m, nil
}

// Tokens implements the API's live view of an account's bucket.
func (d *Dispatcher) Tokens(accountID string) (float64, bool) {
	t, err := d.limiter.Tokens(context.Background(), accountID)
	return t, err == nil
}

// QueueDepth reports queued messages per priority.
func (d *Dispatcher) QueueDepth(accountID string) [3]int {
	if w, ok := d.worker(accountID); ok {
		return w.depth()
	}
	return [3]int{}
}

// sortForQueue orders recovered messages as they must be sent: by creation,
// except that messages with a client_seq keep seq order among themselves
// per recipient (seq 2 may have been created before seq 1), and that a
// message whose outcome is unknown comes first: it was its recipient's
// head, in flight at the stop, and stays the head, so that it waits the
// quiet period before a resend and nothing queued behind it passes it.
func sortForQueue(msgs []wamux.Message) {
	sort.SliceStable(msgs, func(i, j int) bool { return msgs[i].CreatedAt.Before(msgs[j].CreatedAt) })
	slots := map[string][]int{}
	for i, m := range msgs {
		if m.ClientSeq > 0 {
			slots[m.To] = append(slots[m.To], i)
		}
	}
	for _, pos := range slots {
		seqd := make([]wamux.Message, len(pos))
		for k, p := range pos {
			seqd[k] = msgs[p]
		}
		sort.SliceStable(seqd, func(a, b int) bool { return seqd[a].ClientSeq < seqd[b].ClientSeq })
		for k, p := range pos {
			msgs[p] = seqd[k]
		}
	}
	sort.SliceStable(msgs, func(i, j int) bool {
		return msgs[i].Status == wamux.StatusUnknown && msgs[j].Status != wamux.StatusUnknown
	})
}

// CooldownUntil reports when a gateway-imposed cooldown ends.
func (d *Dispatcher) CooldownUntil(accountID string) time.Time {
	return d.limiter.Limit(accountID).CooldownUntil
}

// ReceiptProgress is how far the receipt pipeline has got for an account:
// receipts made durable, and receipts processed (merged, messages
// resolved), both counted since start over the receipts that could carry
// that account's statuses (its partition), so that other accounts'
// receipts neither hold its compensation back nor count as its progress.
// MergePaused reports merging paused (apply_state off):
// statuses are then received and kept, but none resolves a message until
// merging is back, so the compensator resends nothing meanwhile.
// *receipts.Pipeline implements it.
type ReceiptProgress interface {
	Appended(accountID string) int64
	Processed(accountID string) int64
	MergePaused() bool
}

// SetReceiptProgress lets the compensator wait, after the quiet period, for
// statuses that already arrived to be processed before it resends: under
// load the receipt pipeline may lag, and a status in its queue would
// otherwise be missed and the message sent twice.
func (d *Dispatcher) SetReceiptProgress(rp ReceiptProgress) {
	d.progress.Store(&rp)
}

func (d *Dispatcher) receiptProgress() ReceiptProgress {
	if p := d.progress.Load(); p != nil {
		return *p
	}
	return nil
}
