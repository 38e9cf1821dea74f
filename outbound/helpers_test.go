package outbound_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/outbound"
	"github.com/wamux/wamux/ownership"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/sqlite"
)

type env struct {
	t     *testing.T
	store store.Store
	// dstore is the store the dispatcher uses: store, or a wrapper around
	// it that fails on demand.
	dstore   store.Store
	sim      *sim.Server
	simURL   string
	provider outbound.Provider
	settings *settings.Manager
	clock    wamux.Clock
	d        *outbound.Dispatcher
	reg      *prometheus.Registry
	dbPath   string
	log      *slog.Logger
	own      ownership.Ownership
	appPause ratelimit.AppPause
}

type envOpts struct {
	simCfg   sim.Config
	clock    wamux.Clock
	settings map[string]string
	provider func(base outbound.Provider) outbound.Provider
	dbPath   string
	// wrapStore wraps the store the dispatcher sees (the test reads the
	// real one).
	wrapStore func(store.Store) store.Store
	// logger receives the dispatcher's logs; default discards.
	logger *slog.Logger
	// store replaces the SQLite store at dbPath.
	store store.Store
	// ownership builds the dispatcher's Ownership over the store; nil:
	// none.
	ownership func(store.Store) ownership.Ownership
	// appPause is the dispatcher's shared app pause; nil: none.
	appPause ratelimit.AppPause
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newEnv builds a real SQLite store, an in-process simulator and a
// dispatcher sending to it through the real Cloud API client.
func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{t: t, dbPath: o.dbPath, log: o.logger}
	if e.log == nil {
		e.log = quietLog()
	}
	if e.dbPath == "" {
		e.dbPath = filepath.Join(t.TempDir(), "wamux.db")
	}
	st := o.store
	if st == nil {
		sq, err := sqlite.Open(ctx, e.dbPath, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sq.Close() })
		st = sq
	}
	e.store, e.dstore = st, st
	if o.wrapStore != nil {
		e.dstore = o.wrapStore(st)
	}
	if o.simCfg.Logger == nil {
		o.simCfg.Logger = quietLog()
	}
	s, err := sim.New(o.simCfg)
	if err != nil {
		t.Fatal(err)
	}
	url, err := s.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e.sim, e.simURL = s, url
	client, err := cloudapi.New(cloudapi.Config{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	e.provider = client
	if o.provider != nil {
		e.provider = o.provider(client)
	}
	e.clock = o.clock
	if fc, ok := o.clock.(*fakeclock.Clock); ok {
		e.clock = timerClock{fc}
	}
	set, err := settings.Load(ctx, st, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	changes := map[string]string{"pair_interval": "1ms", "pair_burst": "1000", "backoff_base": "10ms", "backoff_cap": "100ms"}
	for k, v := range o.settings {
		changes[k] = v
	}
	if _, err := set.Update(ctx, changes); err != nil {
		t.Fatal(err)
	}
	e.settings = set
	if o.ownership != nil {
		e.own = o.ownership(st)
	}
	e.appPause = o.appPause
	e.start()
	return e
}

func (e *env) start() {
	e.t.Helper()
	e.reg = prometheus.NewRegistry()
	d, err := outbound.New(outbound.Config{Store: e.dstore, Provider: e.provider, Settings: e.settings,
		Logger: e.log, Registry: e.reg, Clock: e.clock, Ownership: e.own, AppPause: e.appPause})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.d = d
	e.t.Cleanup(func() { d.Stop(context.Background()) })
}

func (e *env) stop() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.d.Stop(ctx); err != nil {
		e.t.Fatal(err)
	}
}

// addAccount creates an account in the store, the simulator and the
// dispatcher; simLimits are the simulator's (Meta's) limits for it.
func (e *env) addAccount(id, pnid string, rate float64, burst int, simLimits sim.Limits) wamux.Account {
	e.t.Helper()
	token := "token-" + id
	if simLimits.PairInterval == 0 {
		simLimits.PairInterval = time.Millisecond
		simLimits.PairBurst = 1000
	}
	if err := e.sim.AddNumber(sim.Number{PhoneNumberID: pnid, AccessToken: token, Limits: simLimits}); err != nil {
		e.t.Fatal(err)
	}
	a, err := e.store.CreateAccount(context.Background(), wamux.Account{ID: id, PhoneNumberID: pnid, AccessToken: token,
		BaseURL: e.simURL, RatePerSec: rate, Burst: burst, State: wamux.AccountActive})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.d.AccountChanged(context.Background(), a); err != nil {
		e.t.Fatal(err)
	}
	return a
}

func textMsg(t *testing.T, req admit.Request) wamux.Message {
	t.Helper()
	if req.BizType == "" {
		req.BizType = "test"
	}
	if req.Type == "" {
		req.Type = "text"
		req.Text = []byte(fmt.Sprintf(`{"body":"hello %s"}`, req.To))
	}
	m, err := admit.Message(req)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (e *env) submit(msgs ...wamux.Message) []outbound.SubmitResult {
	e.t.Helper()
	res, err := e.d.Submit(context.Background(), msgs)
	if err != nil {
		e.t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			e.t.Fatalf("submit %d: %v", i, r.Err)
		}
	}
	return res
}

func (e *env) waitAccepted(n int64, timeout time.Duration) {
	e.t.Helper()
	testwait.For(e.t, fmt.Sprintf("%d messages accepted by the simulator", n), timeout, func() bool {
		return e.sim.Stats().Totals.Accepted >= n
	})
}

func (e *env) status(msgID string) wamux.Status {
	e.t.Helper()
	m, err := e.store.GetMessage(context.Background(), msgID)
	if err != nil {
		e.t.Fatal(err)
	}
	return m.Status
}

func seqp(n int64) *int64 { return &n }

// waitUnknown waits until the message's outcome is stored unknown and its
// worker has taken the answer in: the quiet period runs from then, so a
// clock moved afterwards ends it.
func waitUnknown(t *testing.T, e *env, acc, msgID string) {
	t.Helper()
	testwait.For(t, "message unknown", 10*time.Second, func() bool {
		return e.status(msgID) == wamux.StatusUnknown && e.d.AttemptsRunning(acc) == 0
	})
	e.d.Settle(acc)
}

// elapse moves the clock by d and wakes the workers to see it.
func (e *env) elapse(clk *fakeclock.Clock, d time.Duration) {
	clk.Advance(d)
	e.d.Kick()
}

// timerClock gives the dispatcher the fake clock's timers: the waits it
// times on them end when the test moves the clock.
type timerClock struct{ *fakeclock.Clock }

func (c timerClock) AfterFunc(d time.Duration, f func()) func() bool {
	return c.Clock.AfterFunc(d, f).Stop
}
