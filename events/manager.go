package events

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/netguard"
	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/webhooksig"
)

// Defaults of Config.
const (
	ConcurrencyDefault    = 16
	AttemptTimeoutDefault = 10 * time.Second
	BackoffBaseDefault    = time.Second
	BackoffCapDefault     = time.Hour
	PollDefault           = 20 * time.Millisecond
	IdlePollDefault       = time.Second
	PruneEveryDefault     = time.Minute
	GaugeEveryDefault     = 5 * time.Second
	// RotationOverlap is how long the previous secret still signs after a
	// rotation.
	RotationOverlap = 24 * time.Hour
	// MaxFeedWait bounds a long poll of the feed.
	MaxFeedWait = 60 * time.Second
	// MaxDescription bounds a subscription's description, in bytes.
	MaxDescription = 1024
)

// Sealer keeps secrets encrypted at rest.
type Sealer interface {
	Seal(plain string) (string, error)
	Open(sealed string) (string, error)
}

// Config builds a Manager; Store, Sealer, Registry and Logger are required.
type Config struct {
	Store    store.Store
	Sealer   Sealer
	Registry prometheus.Registerer
	Logger   *slog.Logger
	// Guard decides where subscriptions may point; nil allows only https
	// to public addresses.
	Guard *netguard.Guard
	// Settings supplies event_retention and event_retry_window (defaults
	// when nil).
	Settings func() settings.Values
	// Client posts the events; nil means Guard's client with
	// AttemptTimeout.
	Client         *http.Client
	Concurrency    int           // deliveries in flight per subscription
	AttemptTimeout time.Duration // per attempt
	BackoffBase    time.Duration
	BackoffCap     time.Duration
	Poll           time.Duration // how often the feed head is read
	IdlePoll       time.Duration // how often an idle deliverer looks for due retries
	PruneEvery     time.Duration
	GaugeEvery     time.Duration
	Now            func() time.Time
}

func (c *Config) setDefaults() {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.Concurrency <= 0 {
		c.Concurrency = ConcurrencyDefault
	}
	def(&c.AttemptTimeout, AttemptTimeoutDefault)
	def(&c.BackoffBase, BackoffBaseDefault)
	def(&c.BackoffCap, BackoffCapDefault)
	def(&c.Poll, PollDefault)
	def(&c.IdlePoll, IdlePollDefault)
	def(&c.PruneEvery, PruneEveryDefault)
	def(&c.GaugeEvery, GaugeEveryDefault)
	if c.Guard == nil {
		c.Guard = &netguard.Guard{}
	}
	if c.Client == nil {
		c.Client = c.Guard.Client(c.AttemptTimeout)
	}
	if c.Settings == nil {
		c.Settings = settings.Defaults
	}
	if c.Now == nil {
		c.Now = func() time.Time { return time.Now().UTC() }
	}
}

// Manager runs the subscriptions' deliverers and serves the API's
// subscription and feed operations.
type Manager struct {
	cfg     Config
	st      store.Store
	log     *slog.Logger
	metrics *metrics
	client  *http.Client
	watch   *watcher

	mu      sync.Mutex
	ctx     context.Context // Start's, for deliverers started later
	running map[string]*deliverer
	recent  map[string]*attempts
	wg      sync.WaitGroup
	cancel  context.CancelFunc
}

// New builds a Manager; nothing runs before Start.
func New(cfg Config) (*Manager, error) {
	if cfg.Store == nil || cfg.Sealer == nil || cfg.Registry == nil || cfg.Logger == nil {
		return nil, errors.New("events: Store, Sealer, Registry and Logger are required")
	}
	cfg.setDefaults()
	m, err := newMetrics(cfg.Registry)
	if err != nil {
		return nil, fmt.Errorf("events: register metrics: %w", err)
	}
	return &Manager{cfg: cfg, st: cfg.Store, log: cfg.Logger, metrics: m, client: cfg.Client,
		watch:   newWatcher(cfg.Store, cfg.Poll, m, cfg.Logger),
		running: map[string]*deliverer{}, recent: map[string]*attempts{}}, nil
}

// Start begins following the feed, delivering to every active subscription,
// pruning old events and updating the backlog gauges.
func (m *Manager) Start(ctx context.Context) error {
	subs, err := m.st.ListSubscriptions(ctx)
	if err != nil {
		return fmt.Errorf("events: list subscriptions: %w", err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.mu.Lock()
	m.ctx, m.cancel = ctx, cancel
	m.mu.Unlock()
	m.goLoop(func() { m.watch.run(ctx) })
	m.goLoop(func() { m.every(ctx, m.cfg.PruneEvery, m.prune) })
	m.goLoop(func() { m.every(ctx, m.cfg.GaugeEvery, m.gauges) })
	for _, s := range subs {
		if err := m.restart(s); err != nil {
			m.log.Error("events: cannot deliver to subscription", "subscription", s.ID, "err", err)
		}
	}
	return nil
}

// Stop ends every deliverer and loop; deliveries in flight are abandoned
// and attempted again after the next start.
func (m *Manager) Stop() {
	m.mu.Lock()
	cancel := m.cancel
	running := m.running
	m.running = map[string]*deliverer{}
	m.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	for _, d := range running {
		<-d.done
	}
	m.wg.Wait()
}

func (m *Manager) goLoop(fn func()) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		fn()
	}()
}

func (m *Manager) every(ctx context.Context, d time.Duration, fn func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// prune deletes the events older than the retention period.
func (m *Manager) prune(ctx context.Context) {
	const batch = 5000
	before := m.cfg.Now().Add(-m.cfg.Settings().EventRetention)
	for ctx.Err() == nil {
		n, err := m.st.PruneEvents(ctx, before, batch)
		if err != nil {
			if ctx.Err() == nil {
				m.log.Warn("events: prune", "err", err)
			}
			return
		}
		if n > 0 {
			m.log.Info("events: pruned", "events", n, "before", before)
		}
		if n < batch {
			return
		}
	}
}

// gauges refreshes the per-subscription backlog gauges.
func (m *Manager) gauges(ctx context.Context) {
	subs, err := m.st.ListSubscriptions(ctx)
	if err != nil {
		return
	}
	now := m.cfg.Now()
	for _, s := range subs {
		n, oldest, err := m.st.DeliveryBacklog(ctx, s.ID)
		if err != nil {
			return
		}
		m.metrics.pending.WithLabelValues(s.ID).Set(float64(n))
		age := 0.0
		if !oldest.IsZero() {
			age = now.Sub(oldest).Seconds()
		}
		m.metrics.oldest.WithLabelValues(s.ID).Set(age)
		failing := 0.0
		if s.State == wamux.SubscriptionFailing || (s.State == wamux.SubscriptionDisabled && s.StateReason != "") {
			failing = 1
		}
		m.metrics.failing.WithLabelValues(s.ID).Set(failing)
	}
}

// restart stops the subscription's deliverer, if any, and starts one when
// it is active.
func (m *Manager) restart(s wamux.Subscription) error {
	m.mu.Lock()
	old := m.running[s.ID]
	delete(m.running, s.ID)
	ctx := m.ctx
	m.mu.Unlock()
	if old != nil {
		old.cancel()
		<-old.done
	}
	if ctx == nil || ctx.Err() != nil || s.State != wamux.SubscriptionActive {
		return nil
	}
	d, err := m.newDeliverer(s)
	if err != nil {
		return err
	}
	dctx, cancel := context.WithCancel(ctx)
	d.cancel = cancel
	m.mu.Lock()
	if m.ctx.Err() != nil {
		m.mu.Unlock()
		cancel()
		return nil
	}
	m.running[s.ID] = d
	m.mu.Unlock()
	go d.run(dctx)
	return nil
}

func (m *Manager) newDeliverer(s wamux.Subscription) (*deliverer, error) {
	key, err := m.openKey(s.Secret)
	if err != nil {
		return nil, err
	}
	d := &deliverer{m: m, sub: s, key: key, cursor: s.Cursor, done: make(chan struct{})}
	if s.OldSecret != "" && m.cfg.Now().Before(s.OldSecretUntil) {
		if d.oldKey, err = m.openKey(s.OldSecret); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (m *Manager) openKey(sealed string) ([]byte, error) {
	secret, err := m.cfg.Sealer.Open(sealed)
	if err != nil {
		return nil, fmt.Errorf("events: open subscription secret: %w", err)
	}
	return webhooksig.ParseSecret(secret)
}

// stopped stores the state a deliverer stopped in and forgets it.
func (m *Manager) stopped(ctx context.Context, d *deliverer) {
	st, reason := d.stop, d.stopReason
	if _, err := m.st.UpdateSubscription(ctx, d.sub.ID, store.SubscriptionPatch{State: &st, StateReason: &reason}); err != nil {
		m.log.Error("events: store subscription state", "subscription", d.sub.ID, "state", st, "err", err)
	} else {
		m.log.Warn("events: subscription stopped", "subscription", d.sub.ID, "state", st, "reason", reason)
		m.metrics.failing.WithLabelValues(d.sub.ID).Set(1)
	}
	m.mu.Lock()
	if m.running[d.sub.ID] == d {
		delete(m.running, d.sub.ID)
	}
	m.mu.Unlock()
}

// newID returns a subscription id.
func newID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "sub_" + hex.EncodeToString(b[:])
}

// validEvents checks a subscription's event list.
func validEvents(ts []wamux.EventType) error {
	if len(ts) == 0 {
		return wamux.Errorf(wamux.EInvalid, "events must name at least one of message.status, message.inbound, account.state or *")
	}
	for _, t := range ts {
		if !t.Valid() {
			return wamux.Errorf(wamux.EInvalid, "unknown event type %q: use message.status, message.inbound, account.state or *", t)
		}
	}
	return nil
}

func (m *Manager) validAccounts(ctx context.Context, ids []string) error {
	for _, id := range ids {
		if !wamux.ValidAccountID(id) {
			return wamux.Errorf(wamux.EInvalid, "account_ids: %q is not an account id", id)
		}
		if _, err := m.st.GetAccount(ctx, id); err != nil {
			if wamux.ErrorCode(err) == wamux.ENotFound {
				return wamux.Errorf(wamux.EInvalid, "account_ids: account %q does not exist", id)
			}
			return err
		}
	}
	return nil
}

// NewSubscription is what a client gives to create a subscription.
type NewSubscription struct {
	URL         string
	Events      []wamux.EventType
	AccountIDs  []string
	Description string
}

// Create stores a subscription and starts delivering to it; it returns
// the signing secret, which is never shown again.
func (m *Manager) Create(ctx context.Context, n NewSubscription) (wamux.Subscription, string, error) {
	if err := m.cfg.Guard.CheckURL(ctx, n.URL); err != nil {
		return wamux.Subscription{}, "", err
	}
	if err := validEvents(n.Events); err != nil {
		return wamux.Subscription{}, "", err
	}
	if len(n.Description) > MaxDescription {
		return wamux.Subscription{}, "", wamux.Errorf(wamux.EInvalid, "description is longer than %d bytes", MaxDescription)
	}
	if err := m.validAccounts(ctx, n.AccountIDs); err != nil {
		return wamux.Subscription{}, "", err
	}
	secret, sealed, err := m.newSecret()
	if err != nil {
		return wamux.Subscription{}, "", err
	}
	s, err := m.st.CreateSubscription(ctx, wamux.Subscription{ID: newID(), URL: n.URL, Events: slices.Compact(n.Events),
		AccountIDs: n.AccountIDs, Description: n.Description, State: wamux.SubscriptionActive, Secret: sealed})
	if err != nil {
		return wamux.Subscription{}, "", err
	}
	if err := m.restart(s); err != nil {
		return wamux.Subscription{}, "", err
	}
	return s, secret, nil
}

func (m *Manager) newSecret() (plain, sealed string, err error) {
	plain, err = webhooksig.NewSecret()
	if err != nil {
		return "", "", fmt.Errorf("events: new secret: %w", err)
	}
	if sealed, err = m.cfg.Sealer.Seal(plain); err != nil {
		return "", "", fmt.Errorf("events: seal secret: %w", err)
	}
	return plain, sealed, nil
}

// Get returns one subscription.
func (m *Manager) Get(ctx context.Context, id string) (wamux.Subscription, error) {
	return m.st.GetSubscription(ctx, id)
}

// List returns every subscription.
func (m *Manager) List(ctx context.Context) ([]wamux.Subscription, error) {
	return m.st.ListSubscriptions(ctx)
}

// Patch is what a client may change of a subscription; nil fields stay.
type Patch struct {
	URL         *string
	Events      *[]wamux.EventType
	AccountIDs  *[]string
	Description *string
	// State may be active or disabled; failing is the gateway's to set.
	State *wamux.SubscriptionState
}

// Update changes a subscription and restarts its delivery.
func (m *Manager) Update(ctx context.Context, id string, p Patch) (wamux.Subscription, error) {
	sp := store.SubscriptionPatch{URL: p.URL, Events: p.Events, AccountIDs: p.AccountIDs, Description: p.Description, State: p.State}
	if p.URL != nil {
		if err := m.cfg.Guard.CheckURL(ctx, *p.URL); err != nil {
			return wamux.Subscription{}, err
		}
	}
	if p.Events != nil {
		if err := validEvents(*p.Events); err != nil {
			return wamux.Subscription{}, err
		}
		c := slices.Compact(*p.Events)
		sp.Events = &c
	}
	if p.AccountIDs != nil {
		if err := m.validAccounts(ctx, *p.AccountIDs); err != nil {
			return wamux.Subscription{}, err
		}
	}
	if p.Description != nil && len(*p.Description) > MaxDescription {
		return wamux.Subscription{}, wamux.Errorf(wamux.EInvalid, "description is longer than %d bytes", MaxDescription)
	}
	if p.State != nil {
		if *p.State != wamux.SubscriptionActive && *p.State != wamux.SubscriptionDisabled {
			return wamux.Subscription{}, wamux.Errorf(wamux.EInvalid, "state must be active or disabled")
		}
		none := ""
		sp.StateReason = &none
	}
	s, err := m.st.UpdateSubscription(ctx, id, sp)
	if err != nil {
		return wamux.Subscription{}, err
	}
	if p.State != nil && *p.State == wamux.SubscriptionActive {
		m.metrics.failing.WithLabelValues(id).Set(0)
	}
	return s, m.restart(s)
}

// Delete removes a subscription and its pending deliveries.
func (m *Manager) Delete(ctx context.Context, id string) error {
	if err := m.st.DeleteSubscription(ctx, id); err != nil {
		return err
	}
	err := m.restart(wamux.Subscription{ID: id, State: wamux.SubscriptionDisabled})
	m.mu.Lock()
	delete(m.recent, id)
	m.mu.Unlock()
	m.metrics.forget(id)
	return err
}

// RotateSecret gives the subscription a new secret and returns it; the
// previous one signs too for RotationOverlap.
func (m *Manager) RotateSecret(ctx context.Context, id string) (wamux.Subscription, string, error) {
	cur, err := m.st.GetSubscription(ctx, id)
	if err != nil {
		return wamux.Subscription{}, "", err
	}
	secret, sealed, err := m.newSecret()
	if err != nil {
		return wamux.Subscription{}, "", err
	}
	until := m.cfg.Now().Add(RotationOverlap)
	s, err := m.st.UpdateSubscription(ctx, id, store.SubscriptionPatch{Secret: &sealed, OldSecret: &cur.Secret, OldSecretUntil: &until})
	if err != nil {
		return wamux.Subscription{}, "", err
	}
	return s, secret, m.restart(s)
}

// Replay delivers again every kept event created since the given time.
func (m *Manager) Replay(ctx context.Context, id string, since time.Time) (wamux.Subscription, error) {
	if _, err := m.st.GetSubscription(ctx, id); err != nil {
		return wamux.Subscription{}, err
	}
	c, err := m.st.EventCursorAt(ctx, since)
	if err != nil {
		return wamux.Subscription{}, err
	}
	s, err := m.st.UpdateSubscription(ctx, id, store.SubscriptionPatch{Cursor: &c})
	if err != nil {
		return wamux.Subscription{}, err
	}
	return s, m.restart(s)
}

// Backlog reports a subscription's pending deliveries and the creation time
// of the oldest one's event.
func (m *Manager) Backlog(ctx context.Context, id string) (int, time.Time, error) {
	return m.st.DeliveryBacklog(ctx, id)
}

// Recent returns the latest events committed since the start, newest first
// (at most 50), for the dashboard.
func (m *Manager) Recent() []wamux.Event { return m.watch.latest() }

// Feed lists events after the cursor; with wait > 0 and nothing to list
// it waits up to wait for some.
func (m *Manager) Feed(ctx context.Context, after string, limit int, wait time.Duration) ([]wamux.Event, string, error) {
	wait = min(wait, MaxFeedWait)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		changed := m.watch.changed()
		es, next, err := m.st.ListEvents(ctx, after, limit)
		if err != nil || len(es) > 0 || wait <= 0 {
			return es, next, err
		}
		select {
		case <-ctx.Done():
			return nil, after, nil
		case <-deadline.C:
			return nil, after, nil
		case <-changed:
		}
	}
}
