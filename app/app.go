// Package app wires the gateway together from its configuration and owns
// its lifecycle: Start brings the parts up in dependency order, Stop takes
// them down in reverse within a bound (stop intake, drain, close stores).
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/wamux/wamux/config"
	"github.com/wamux/wamux/events"
	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/internal/apikey"
	"github.com/wamux/wamux/internal/baseurl"
	"github.com/wamux/wamux/internal/httpserve"
	"github.com/wamux/wamux/internal/netguard"
	"github.com/wamux/wamux/internal/seal"
	"github.com/wamux/wamux/outbound"
	"github.com/wamux/wamux/ownership"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/retention"
	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/postgres"
	"github.com/wamux/wamux/store/sqlite"
)

// SQLiteFile is the database file name inside the data directory.
const SQLiteFile = "wamux.db"

// SecretKeyFile, in the data directory, holds the key that seals secrets
// at rest when no secret_key (WAMUX_SECRET_KEY) is configured.
const SecretKeyFile = "secret.key"

// App is one running gateway. It is embeddable in tests: listen on
// 127.0.0.1:0 with a temporary data dir and read Addr.
type App struct {
	cfg      config.Config
	log      *slog.Logger
	registry *prometheus.Registry

	mu       sync.Mutex
	started  bool
	store    store.Store
	server   *http.Server
	listener net.Listener
	serveErr chan error

	dispatcher *outbound.Dispatcher
	// cluster are the shared backends in cluster mode (nil embedded).
	cluster *clusterParts
	// embedded is the ownership the dispatcher follows outside cluster
	// mode: every partition, held while the claim lasts, so that the
	// dispatcher fences its message updates as a cluster node does.
	embedded *ownership.Embedded
	// claim makes this process the store's only gateway (nil for a store
	// that cannot be claimed); watchLost stops the dispatcher when the
	// claim is lost, and reports it on fatal.
	claim     store.Claim
	stopWatch context.CancelFunc
	watchDone chan struct{}
	fatal     chan error
	settings  *settings.Manager
	receipts  *receipts.Pipeline
	events    *events.Manager
	pruner    *retention.Pruner
	// closeProvider releases the Cloud API client Start made (its
	// keep-alive connections); a no-op for a Provider given by the caller.
	closeProvider func()

	// Provider replaces the Cloud API client (tests, the demo's in-process
	// simulator may also just point accounts' base_url at it). Set before
	// Start.
	Provider outbound.Provider
	// ReceiptBloom sizes the receipt pipeline's Bloom filter; zero fields
	// take the defaults. The demo makes it small so false positives (each
	// confirmed against the store) show. Set before Start.
	ReceiptBloom receipts.BloomConfig
	// InboundPruneEvery is how often inbound messages past their
	// retention are deleted (retention.EveryDefault when zero). Set
	// before Start.
	InboundPruneEvery time.Duration
	// ClusterTimeout bounds, in cluster mode, reaching Kafka and Redis at
	// start and one append to the receipt topic (after which intake
	// answers 503); ClusterTimeoutDefault when zero. Set before Start.
	ClusterTimeout time.Duration
}

// New prepares an App; nothing is opened until Start.
func New(cfg config.Config, log *slog.Logger) *App {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Lines logged with a request's context carry its request_id.
	log = slog.New(httpapi.WithRequestIDs(log.Handler()))
	return &App{cfg: cfg, log: log, registry: reg, fatal: make(chan error, 1)}
}

// Fatal delivers the error that ends a running gateway without a Stop:
// the claim on its store was lost (another process took it), so its
// dispatcher has already stopped sending. The caller should Stop the App
// and exit non-zero; `wamux serve` does.
func (a *App) Fatal() <-chan error { return a.fatal }

// Registry is the metrics registry every part registers on.
func (a *App) Registry() *prometheus.Registry { return a.registry }

// Dispatcher is the send pipeline (nil before Start).
func (a *App) Dispatcher() *outbound.Dispatcher { return a.dispatcher }

// Receipts is the receipt pipeline (nil before Start).
func (a *App) Receipts() *receipts.Pipeline { return a.receipts }

// Settings are the runtime settings (nil before Start).
func (a *App) Settings() *settings.Manager { return a.settings }

// Reload re-reads the configuration file's settings: section and applies
// it like PATCH /v1/config: validated as a whole (nothing changes when any
// key or value is bad), each change logged with its old and new value,
// picked up by the running pipelines without a restart. `wamux serve`
// calls it on SIGHUP.
func (a *App) Reload(ctx context.Context) error {
	a.mu.Lock()
	set, file := a.settings, a.cfg.File
	a.mu.Unlock()
	if set == nil {
		return errors.New("app: reload before start")
	}
	if file == "" {
		return errors.New("app: no configuration file to reload (start with --config or WAMUX_CONFIG)")
	}
	changes, err := config.ReadSettings(file)
	if err != nil {
		return fmt.Errorf("app: reload: %w", err)
	}
	if len(changes) == 0 {
		a.log.Info("configuration reloaded: no settings section", "file", file)
		return nil
	}
	if _, err := set.Update(ctx, changes); err != nil {
		return fmt.Errorf("app: reload %s: %w", file, err)
	}
	a.log.Info("configuration reloaded", "file", file, "settings", len(changes))
	return nil
}

// Store is the opened store (nil before Start).
func (a *App) Store() store.Store { return a.store }

// Addr is the address the HTTP server listens on, once started.
func (a *App) Addr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.listener == nil {
		return ""
	}
	return a.listener.Addr().String()
}

// Start opens and claims the store, then brings up the settings, the
// dispatcher, the receipt pipeline and the HTTP server, in that order. On
// error everything already opened is closed again.
func (a *App) Start(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started {
		return errors.New("app: already started")
	}
	keys, err := a.keyring()
	if err != nil {
		return err
	}
	baseURLs, err := baseurl.Parse(a.cfg.ProviderBaseURLs)
	if err != nil {
		return fmt.Errorf("app: provider_base_urls: %w", err)
	}
	var u undoStack
	st, claim, err := a.openClaimedStore(ctx, &u, keys)
	if err != nil {
		return u.fail(err)
	}
	var cl *clusterParts
	if a.cfg.Cluster() {
		if cl, err = a.startCluster(ctx, &u, st, keys); err != nil {
			return u.fail(err)
		}
	}
	if err := a.warnOutsideBaseURLs(ctx, st, baseURLs); err != nil {
		return u.fail(err)
	}
	set, err := a.loadSettings(ctx, st)
	if err != nil {
		return u.fail(err)
	}
	if cl != nil {
		if err := cl.share(ctx, &u, set); err != nil {
			return u.fail(err)
		}
	}
	provider, closeProvider, err := a.provider(&u)
	if err != nil {
		return u.fail(err)
	}
	own, embedded, err := a.ownership(ctx, &u, st, claim, cl)
	if err != nil {
		return u.fail(err)
	}
	disp, err := a.startDispatcher(ctx, &u, st, provider, set, own, cl)
	if err != nil {
		return u.fail(err)
	}
	var intake httpapi.Outbound = disp
	if cl != nil {
		if intake, err = cl.follow(ctx, &u, a, st, disp); err != nil {
			return u.fail(err)
		}
	}
	pipe, err := a.startReceipts(ctx, &u, st, set, disp, cl)
	if err != nil {
		return u.fail(err)
	}
	evs, err := a.startEvents(ctx, &u, st, set, keys)
	if err != nil {
		return u.fail(err)
	}
	pruner, err := a.startRetention(&u, st, set)
	if err != nil {
		return u.fail(err)
	}
	api, err := httpapi.New(httpapi.Config{
		Events:      evs,
		Store:       st,
		Logger:      a.log,
		Registry:    a.registry,
		APIKeys:     a.cfg.APIKeys,
		Live:        disp,
		Outbound:    intake,
		Settings:    set,
		Receipts:    pipe,
		AppSecret:   a.cfg.AppSecret,
		VerifyToken: a.cfg.VerifyToken,
		ReadMarker:  readMarker(provider),
		ReadyChecks: cl.readyChecks(),
		Partitions:  cl.partitions(),

		ProviderBaseURLs: baseURLs,
	})
	if err != nil {
		return u.fail(fmt.Errorf("app: http api: %w", err))
	}
	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		return u.fail(fmt.Errorf("app: listen on %s: %w", a.cfg.Listen, err))
	}
	if len(a.cfg.APIKeys) == 0 {
		a.log.Warn("no API keys configured (WAMUX_API_KEYS): every /v1 request will be refused")
	}
	if keys, err := apikey.Parse(a.cfg.APIKeys); err == nil {
		for _, k := range keys {
			a.log.Info("API key", "key_id", k.ID(), "scopes", k.Scopes.String())
		}
	}
	a.store, a.listener, a.dispatcher, a.settings = st, ln, disp, set
	a.receipts, a.closeProvider, a.events = pipe, closeProvider, evs
	a.pruner = pruner
	a.claim, a.cluster, a.embedded = claim, cl, embedded
	a.watchLost(disp)
	a.serve(api, ln)
	a.started = true
	a.log.Info("wamux started", "listen", ln.Addr().String(), "store", a.cfg.RedactedStore(), "cluster", cl != nil, "node_id", a.cfg.NodeID)
	return nil
}

// warnOutsideBaseURLs logs every stored account whose base_url is outside
// the provider allow-list: it keeps sending there (stored data is not
// broken by a narrower list), but a change of it must fall under the list.
func (a *App) warnOutsideBaseURLs(ctx context.Context, st store.Store, allowed baseurl.List) error {
	accounts, err := st.ListAccounts(ctx)
	if err != nil {
		return fmt.Errorf("app: list accounts: %w", err)
	}
	for _, acc := range accounts {
		if !allowed.Allows(acc.BaseURL) {
			a.log.Warn("account base_url is outside provider_base_urls (WAMUX_PROVIDER_BASE_URLS); it keeps sending there until it is changed",
				"account_id", acc.ID, "base_url", acc.BaseURL, "provider_base_urls", allowed.String())
		}
	}
	return nil
}

// undoStack takes down, in reverse, what Start brought up before a step
// failed.
type undoStack []func()

func (u *undoStack) push(f func()) { *u = append(*u, f) }

// fail undoes every step and returns err.
func (u *undoStack) fail(err error) error {
	for i := len(*u) - 1; i >= 0; i-- {
		(*u)[i]()
	}
	return err
}

// openClaimedStore opens the store and claims it: one gateway per store,
// claimed before anything writes to it and before the dispatcher restores
// the queued messages it would send. The claim (nil for a store that
// cannot be claimed) is released after the store closed, when nothing of
// ours writes any more.
func (a *App) openClaimedStore(ctx context.Context, u *undoStack, keys *seal.Keyring) (store.Store, store.Claim, error) {
	st, err := openStore(ctx, a.cfg, a.log, keys)
	if err != nil {
		return nil, nil, err
	}
	owner, ok := st.(store.Owner)
	if !ok || a.cfg.Cluster() {
		// Cluster nodes share the store; each one's writes are fenced
		// per partition instead.
		u.push(func() { st.Close() })
		return st, nil, nil
	}
	claim, err := owner.Claim(ctx)
	if errors.Is(err, store.ErrInUse) {
		st.Close()
		return nil, nil, fmt.Errorf("app: store %s is in use by another wamux gateway process; one gateway serves one store: stop the other one, or give this one its own %s: %w",
			a.storeName(), a.storeHint(), err)
	}
	if err != nil {
		st.Close()
		return nil, nil, fmt.Errorf("app: claim store %s: %w", a.storeName(), err)
	}
	u.push(func() { st.Close(); claim.Release() })
	return st, claim, nil
}

// loadSettings reads the runtime settings from the store; the
// configuration file's settings: section wins over them at start.
func (a *App) loadSettings(ctx context.Context, st store.Store) (*settings.Manager, error) {
	set, err := settings.Load(ctx, st, a.log)
	if err != nil {
		return nil, fmt.Errorf("app: %w", err)
	}
	if len(a.cfg.Settings) > 0 {
		if _, err := set.Update(ctx, a.cfg.Settings); err != nil {
			return nil, fmt.Errorf("app: settings from %s: %w", a.cfg.File, err)
		}
	}
	return set, nil
}

// provider is the Provider given by the caller, else a Cloud API client
// and how to close it.
func (a *App) provider(u *undoStack) (outbound.Provider, func(), error) {
	if a.Provider != nil {
		return a.Provider, func() {}, nil
	}
	client, err := cloudapi.New(cloudapi.Config{})
	if err != nil {
		return nil, nil, fmt.Errorf("app: cloud api client: %w", err)
	}
	u.push(client.Close)
	return client, client.Close, nil
}

// readMarker is the provider's mark-read call, when it has one.
func readMarker(p outbound.Provider) httpapi.ReadMarker {
	if m, ok := p.(httpapi.ReadMarker); ok {
		return m
	}
	return nil
}

// ownership is what the dispatcher follows: in cluster mode the
// partitions the receipt topic's group assigns (cl.own); otherwise every
// partition of the store, acquired for this gateway and held while its
// claim lasts (Embedded), so that its updates are fenced the same way.
func (a *App) ownership(ctx context.Context, u *undoStack, st store.Store, claim store.Claim, cl *clusterParts) (ownership.Ownership, *ownership.Embedded, error) {
	if cl != nil {
		return cl.own, nil, nil
	}
	own, err := ownership.NewEmbedded(ctx, ownership.Config{Store: st, Logger: a.log}, claim)
	if err != nil {
		return nil, nil, fmt.Errorf("app: %w", err)
	}
	u.push(func() { own.Close() })
	return own, own, nil
}

// clusterReload is how often a cluster node looks in the store for the
// messages other nodes stored for the accounts it holds
// (outbound.Config.ReloadInterval).
const clusterReload = 2 * time.Second

func (a *App) startDispatcher(ctx context.Context, u *undoStack, st store.Store, provider outbound.Provider, set *settings.Manager, own ownership.Ownership, cl *clusterParts) (*outbound.Dispatcher, error) {
	cfg := outbound.Config{
		Store: st, Provider: provider, Settings: set, Logger: a.log, Registry: a.registry, Ownership: own,
	}
	if cl != nil {
		cfg.Limiter, cfg.Pairs, cfg.AppPause, cfg.Departures = cl.limiter, cl.pairs, cl.appPause, cl.depart
		cfg.ReloadInterval = clusterReload
	}
	disp, err := outbound.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("app: outbound: %w", err)
	}
	if err := disp.Start(ctx); err != nil {
		return nil, fmt.Errorf("app: start outbound: %w", err)
	}
	u.push(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		disp.Stop(c)
	})
	return disp, nil
}

// startReceipts starts the receipt pipeline, which first works off what
// the log kept from the last run, before the webhook takes new receipts.
// Inbound messages count against the number's throughput as our sends do:
// the pipeline charges the recent ones to the account's bucket. The
// dispatcher's compensator then waits for receipts the pipeline has not
// processed yet before it resends.
func (a *App) startReceipts(ctx context.Context, u *undoStack, st store.Store, set *settings.Manager, disp *outbound.Dispatcher, cl *clusterParts) (*receipts.Pipeline, error) {
	bloom := a.bloomConfig()
	cfg := receipts.Config{Store: st, Registry: a.registry, Settings: set, Logger: a.log, Bloom: bloom,
		OnInbound: disp.ChargeInbound}
	if cl != nil {
		cfg.Stream, cfg.BloomFilter = cl.stream, cl.bloom
		a.log.Info("receipt Bloom filter in redis", "keys_per_hour", bloom.ExpectedPerHour)
	} else {
		a.log.Info("receipt Bloom filter", "keys_per_hour", bloom.ExpectedPerHour, "mib", bloom.MemoryBytes()>>20)
	}
	pipe, err := receipts.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("app: receipts: %w", err)
	}
	if err := pipe.Start(ctx); err != nil {
		return nil, fmt.Errorf("app: start receipts: %w", err)
	}
	disp.SetReceiptProgress(pipe)
	u.push(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		pipe.Stop(c)
	})
	return pipe, nil
}

// bloomConfig sizes the receipt Bloom filter: ReceiptBloom, else the
// configured keys per hour.
func (a *App) bloomConfig() receipts.BloomConfig {
	bloom := a.ReceiptBloom
	if bloom.ExpectedPerHour == 0 && a.cfg.ReceiptBloomPerHour > 0 {
		bloom.ExpectedPerHour = uint(a.cfg.ReceiptBloomPerHour)
	}
	if bloom.ExpectedPerHour == 0 {
		bloom.ExpectedPerHour = receipts.BloomExpectedPerHourDefault
	}
	return bloom
}

// keyring builds the keys that seal secrets at rest (the accounts' access
// tokens in the store, the subscriptions' signing secrets): the
// configured secret_key, or a key file in the data directory.
func (a *App) keyring() (*seal.Keyring, error) {
	if a.cfg.SecretKey == "" {
		if err := os.MkdirAll(a.cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("app: data directory for the secret key: %w", err)
		}
	}
	keys, err := seal.FromEnvOrFile(a.cfg.SecretKey, filepath.Join(a.cfg.DataDir, SecretKeyFile))
	if err != nil {
		return nil, fmt.Errorf("app: secret key: %w", err)
	}
	return keys, nil
}

// startEvents starts delivering events to subscriptions, their secrets
// sealed with keys.
func (a *App) startEvents(ctx context.Context, u *undoStack, st store.Store, set *settings.Manager, keys *seal.Keyring) (*events.Manager, error) {
	allow, err := netguard.ParseNetworks(a.cfg.EventAllowNetworks)
	if err != nil {
		return nil, fmt.Errorf("app: event_allow_networks: %w", err)
	}
	m, err := events.New(events.Config{Store: st, Sealer: keys, Registry: a.registry, Logger: a.log,
		Guard: &netguard.Guard{Allow: allow}, Settings: set.Current})
	if err != nil {
		return nil, fmt.Errorf("app: events: %w", err)
	}
	if err := m.Start(ctx); err != nil {
		return nil, fmt.Errorf("app: events: %w", err)
	}
	u.push(m.Stop)
	return m, nil
}

// startRetention starts deleting inbound messages older than the
// inbound_retention setting.
func (a *App) startRetention(u *undoStack, st store.Store, set *settings.Manager) (*retention.Pruner, error) {
	p, err := retention.New(retention.Config{Store: st, Registry: a.registry, Logger: a.log,
		Retention: func() time.Duration { return set.Current().InboundRetention }, Every: a.InboundPruneEvery})
	if err != nil {
		return nil, fmt.Errorf("app: inbound retention: %w", err)
	}
	p.Start()
	u.push(p.Stop)
	return p, nil
}

// serve starts the HTTP server on ln. Every phase of a connection is
// bounded and the connections open at once are capped (httpserve), so
// clients that trickle, idle or open sockets by the thousand can hold
// neither the file limit nor a goroutine for ever.
func (a *App) serve(api http.Handler, ln net.Listener) {
	hs := httpserve.New(api, a.cfg.MaxConnections, slog.NewLogLogger(a.log.Handler(), slog.LevelWarn))
	a.server = hs.Server
	a.serveErr = make(chan error, 1)
	go func() { a.serveErr <- hs.Serve(ln) }()
	a.log.Info("HTTP connections capped", "max_connections", hs.MaxConns())
}

// Stop stops intake and waits for in-flight requests until ctx ends, then
// closes the store. The dispatcher stops at once, alongside the HTTP
// drain: it starts no new provider call (messages submitted meanwhile are
// stored and sent after the next start), and the calls it has open get
// the whole bound to finish and be recorded, however long one stalled
// client holds the HTTP drain. Work acknowledged before Stop is already
// durable, so a drain cut short by ctx loses nothing that was
// acknowledged: what was left (provider calls, receipts not merged yet)
// is picked up by the next Start. Such a drain is logged, not returned;
// the error is for failures (serving, closing the store).
func (a *App) Stop(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.started {
		return nil
	}
	a.started = false
	a.stopWatch()
	<-a.watchDone // a dispatcher stopped on a lost claim has drained
	dispatcherStopped := make(chan error, 1)
	go func() { dispatcherStopped <- a.dispatcher.Stop(ctx) }()
	var errs []error
	if err := a.server.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("drain http: %w", err))
		a.server.Close()
	}
	if err := <-a.serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, fmt.Errorf("serve http: %w", err))
	}
	if err := a.receipts.Stop(ctx); err != nil { // intake is closed; drain
		errs = append(errs, err)
	}
	if err := <-dispatcherStopped; err != nil {
		errs = append(errs, err)
	}
	a.events.Stop() // deliveries in flight are attempted again after the next start
	a.pruner.Stop()
	if a.embedded != nil { // the dispatcher has stopped: it watches it no more
		a.embedded.Close()
	}
	a.closeProvider()     // no call of the dispatcher is open any more
	if a.cluster != nil { // the pipelines have stopped: nothing appends or acquires
		if err := a.cluster.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := a.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close store: %w", err))
	}
	if a.claim != nil { // last: nothing of ours writes to the store any more
		if err := a.claim.Release(); err != nil {
			errs = append(errs, fmt.Errorf("release store: %w", err))
		}
	}
	errs = a.logCutShort(ctx, errs)
	a.log.Info("wamux stopped")
	return errors.Join(errs...)
}

// watchLost stops the dispatcher as soon as the claim on the store is
// lost: another gateway process owns the store now and sends its queued
// messages, so this one must start no provider call more. The rest (the
// API, receipts) runs on until Stop; Fatal tells the caller to stop.
func (a *App) watchLost(disp *outbound.Dispatcher) {
	var ctx context.Context
	ctx, a.stopWatch = context.WithCancel(context.Background())
	a.watchDone = make(chan struct{})
	var lost <-chan struct{}
	if a.claim != nil {
		lost = a.claim.Lost()
	}
	go func() {
		defer close(a.watchDone)
		select {
		case <-ctx.Done():
			return
		case <-lost:
		}
		err := fmt.Errorf("app: lost the claim on store %s; stopped sending: %w", a.storeName(), a.claim.Err())
		a.log.Error("another process took over the store; this gateway stopped sending and must be stopped", "err", err)
		bound := time.Duration(a.cfg.ShutdownTimeout)
		if bound <= 0 {
			bound = config.ShutdownTimeoutDefault
		}
		c, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		if err := disp.Stop(c); err != nil {
			a.log.Warn("dispatcher stop after the lost claim", "err", err)
		}
		select {
		case a.fatal <- err:
		default: // an earlier run's loss nobody read
		}
	}()
}

// storeName names the store in messages; a PostgreSQL URL without its
// password.
func (a *App) storeName() string {
	if a.cfg.Store == "sqlite" {
		return "sqlite " + filepath.Join(a.cfg.DataDir, SQLiteFile)
	}
	return a.cfg.RedactedStore()
}

// storeHint names the setting that gives a gateway a store of its own.
func (a *App) storeHint() string {
	if a.cfg.Store == "sqlite" {
		return "data dir (--data-dir / WAMUX_DATA_DIR)"
	}
	return "database or schema (search_path in the store URL)"
}

// logCutShort logs the drains that ctx ended and returns the other errors.
// A cut-short drain is the shutdown bound doing its job (a provider call
// still open at it is recorded unknown, or left sending, and compensated
// after the next start), not a failed stop: `wamux serve` exits 0 after it.
func (a *App) logCutShort(ctx context.Context, errs []error) []error {
	if ctx.Err() == nil {
		return errs
	}
	var failed []error
	for _, err := range errs {
		if errors.Is(err, ctx.Err()) {
			a.log.Warn("shutdown bound reached; the rest is left for the next start", "err", err)
			continue
		}
		failed = append(failed, err)
	}
	return failed
}

// openStore opens the configured store, the accounts' access tokens
// sealed with keys.
func openStore(ctx context.Context, cfg config.Config, log *slog.Logger, keys *seal.Keyring) (store.Store, error) {
	if cfg.Store == "sqlite" {
		path := filepath.Join(cfg.DataDir, SQLiteFile)
		st, err := sqlite.Open(ctx, path, sqlite.Options{Logger: log, Sealer: keys})
		if err != nil {
			return nil, fmt.Errorf("app: open sqlite %s: %w", path, err)
		}
		return st, nil
	}
	if strings.HasPrefix(cfg.Store, "postgres://") || strings.HasPrefix(cfg.Store, "postgresql://") {
		st, err := postgres.Open(ctx, cfg.Store, postgres.Options{Logger: log, Sealer: keys})
		if err != nil {
			// The DSN may hold a password: name only the redacted form.
			return nil, fmt.Errorf("app: open postgres %s: %w", cfg.RedactedStore(), err)
		}
		return st, nil
	}
	return nil, fmt.Errorf("app: unknown store %q", cfg.RedactedStore())
}
