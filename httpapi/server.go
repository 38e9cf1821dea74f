// Package httpapi is the gateway's HTTP surface: the /v1 REST API, health
// and readiness, metrics, and (later) the webhook endpoint and dashboard.
// Handlers validate before they write, and every error leaves as the JSON
// envelope {"error":{"code","message","request_id"}}.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/apikey"
	"github.com/wamux/wamux/internal/baseurl"
	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/store"
)

// Body limits from the contract: larger bodies get 413.
const (
	MaxBodyV1      = 1 << 20 // 1 MiB on /v1
	MaxBodyBatch   = 8 << 20 // 8 MiB on batch endpoints
	MaxBodyWebhook = 3 << 20 // 3 MiB on /webhook
)

// StoreTimeoutDefault bounds each store call of a request when
// Config.StoreTimeout is zero.
const StoreTimeoutDefault = 10 * time.Second

// LiveState reports what only the running dispatcher knows about an
// account: the tokens left in its bucket and its queue depth per priority.
type LiveState interface {
	Tokens(accountID string) (float64, bool)
	QueueDepth(accountID string) [3]int
	// CooldownUntil is when a cooldown the gateway imposed (after
	// repeated 429s) ends; zero or past when there is none.
	CooldownUntil(accountID string) time.Time
}

// Config holds what the server needs; Store, Logger and Registry are
// required.
type Config struct {
	Store    store.Store
	Logger   *slog.Logger
	Registry *prometheus.Registry
	// APIKeys authenticate /v1: each a key, optionally with scopes after
	// a colon ("k2:send", "k3:read+send"; internal/apikey), all scopes
	// without. With none configured every /v1 request is refused: an open
	// API would let anyone send from every account.
	APIKeys []string
	// Live is optional; without it an account reports a full bucket and
	// empty queues (nothing is being sent).
	Live LiveState
	// StoreTimeout bounds each store call made for a request
	// (StoreTimeoutDefault when zero).
	StoreTimeout time.Duration
	// Outbound is the send pipeline; without it the message endpoints
	// are not served.
	Outbound Outbound
	// Settings are the runtime settings behind /v1/config; without them
	// the endpoint is not served.
	Settings *settings.Manager
	// Receipts is the receipt pipeline behind /webhook and
	// /v1/receipts:batch; without it those are not served.
	Receipts Receipts
	// AppSecret verifies webhook signatures: one Meta app secret, or
	// several separated by commas (webhooks of several apps, or the old and
	// the new secret during a rotation; a body signed under any of them
	// verifies). VerifyToken answers Meta's subscription handshake.
	// Neither is ever logged or returned.
	AppSecret   string
	VerifyToken string
	// WebhookMaxBodies and WebhookBodyBudget bound the webhook bodies
	// being read (and not yet verified) at once, in count and bytes
	// (WebhookMaxBodiesDefault, WebhookBodyBudgetDefault when zero).
	WebhookMaxBodies  int
	WebhookBodyBudget int64
	// Events serves /v1/subscriptions and /v1/events; without it they
	// are not served.
	Events Events
	// ReadMarker marks inbound messages read at the provider; without it
	// POST /v1/accounts/{id}/inbound/{wamid}/read is not served.
	ReadMarker ReadMarker
	// ProviderBaseURLs are where an account's base_url may point (its
	// access token goes there); empty allows Meta's Graph API only.
	ProviderBaseURLs baseurl.List
	// Clock times the per-key request buckets; the wall clock when nil.
	Clock wamux.Clock
	// ReadyChecks are what /readyz asks besides the store (cluster mode:
	// Kafka, Redis), each by name; all must answer for 200.
	ReadyChecks []ReadyCheck
	// Partitions is the number of partitions a cluster spreads the
	// accounts over (wamux.PartitionOf); each account then shows the
	// node holding its partition's lease as its owner. 0: one node, no
	// owner shown.
	Partitions int
}

// ReadyCheck is one dependency /readyz asks: Ping returns nil when it
// answers within ctx.
type ReadyCheck struct {
	Name string
	Ping func(ctx context.Context) error
}

// Server serves the HTTP API.
type Server struct {
	store        store.Store
	log          *slog.Logger
	auth         *apiKeys
	keyLimits    *keyLimits // key_rate, key_burst per API key
	live         LiveState
	metrics      *metrics
	registry     *prometheus.Registry
	storeTimeout time.Duration
	outbound     Outbound
	accountLocks accountLocks // one change of an account at a time (accountlock.go)
	settings     *settings.Manager
	events       Events
	readMarker   ReadMarker
	baseURLs     baseurl.List
	readyChecks  []ReadyCheck
	partitions   int
	handler      http.Handler
	// patterns are the routes registered, in order, so a test can walk
	// every one of them (export_test.go) and none is left unchecked.
	patterns []string
	// scopes is what a key needs for each /v1 pattern.
	scopes map[string]apikey.Scope

	// receipt endpoints (webhook.go, receipts.go)
	receipts    Receipts
	appSecrets  []string
	verifyToken string
	phones      *phoneCache
	webhookGate *bodyGate
}

// New builds the server and registers its metrics on cfg.Registry.
func New(cfg Config) (*Server, error) {
	m, err := newMetrics(cfg.Registry)
	if err != nil {
		return nil, err
	}
	auth, err := newAPIKeys(cfg.APIKeys)
	if err != nil {
		return nil, err
	}
	var clock wamux.Clock = wallClock{}
	if cfg.Clock != nil {
		clock = cfg.Clock
	}
	s := &Server{
		store:        cfg.Store,
		log:          cfg.Logger,
		auth:         auth,
		keyLimits:    newKeyLimits(clock, cfg.Settings),
		scopes:       map[string]apikey.Scope{},
		live:         cfg.Live,
		metrics:      m,
		registry:     cfg.Registry,
		storeTimeout: cfg.StoreTimeout,
		readyChecks:  cfg.ReadyChecks,
		partitions:   cfg.Partitions,
		outbound:     cfg.Outbound,
		settings:     cfg.Settings,
		events:       cfg.Events,
		readMarker:   cfg.ReadMarker,
		baseURLs:     cfg.ProviderBaseURLs,
	}
	if s.baseURLs.Len() == 0 {
		s.baseURLs = baseurl.MustParse(wamux.DefaultBaseURL)
	}
	if s.storeTimeout <= 0 {
		s.storeTimeout = StoreTimeoutDefault
	}
	s.initReceipts(cfg)
	s.handler = s.routes()
	return s, nil
}

// ServeHTTP makes Server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	register := func(pattern string, h http.Handler) {
		s.patterns = append(s.patterns, pattern)
		mux.Handle(pattern, s.instrument(pattern, h))
	}
	handle := func(pattern string, h http.HandlerFunc) { register(pattern, h) }
	handle("GET /healthz", s.handleHealthz)
	handle("GET /readyz", s.handleReadyz)
	handle("GET /{$}", s.handleDashboard) // the live dashboard
	handle("GET /ui/state", s.handleUIState)
	handle("GET /ui/{file}", s.handleUIAsset)
	register("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))

	// v1 routes need a key holding their scope, then take only the query
	// parameters they name (none but the lists' limit).
	v1 := func(pattern string, need apikey.Scope, h http.HandlerFunc, params ...string) {
		s.scopes[pattern] = need
		handle(pattern, s.requireKey(need, onlyParams(params, h)))
	}
	v1("POST /v1/accounts", apikey.Admin, s.handleCreateAccount)
	v1("GET /v1/accounts", apikey.Read, s.handleListAccounts)
	v1("GET /v1/accounts/{id}", apikey.Read, s.handleGetAccount)
	v1("PATCH /v1/accounts/{id}", apikey.Admin, s.handlePatchAccount)
	if s.outbound != nil {
		v1("POST /v1/messages", apikey.Send, s.handleSubmit)
		v1("POST /v1/messages:batch", apikey.Send, s.handleSubmitBatch)
		v1("GET /v1/messages/{msg_id}", apikey.Read, s.handleGetMessage)
		v1("POST /v1/messages/{msg_id}/release", apikey.Admin, s.handleRelease)
		v1("POST /v1/messages/{msg_id}/drop", apikey.Admin, s.handleDrop)
	}
	v1("GET /v1/audit", apikey.Admin, s.handleAudit, "limit")
	if s.settings != nil {
		v1("GET /v1/config", apikey.Read, s.handleGetConfig)
		v1("PATCH /v1/config", apikey.Admin, s.handlePatchConfig)
	}
	s.receiptRoutes(handle, v1)
	s.subscriptionRoutes(v1)
	s.inboundRoutes(v1)

	return s.withRequestID(s.recoverPanics(jsonFallbacks(mux)))
}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz answers 200 only when the store answers, so a load balancer
// stops sending to a node whose database is gone.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := append([]ReadyCheck{{Name: "store", Ping: s.store.Ping}}, s.readyChecks...)
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() { errs[i] = c.Ping(ctx) })
	}
	wg.Wait()
	status := make(map[string]string, len(checks))
	var down []string
	for i, c := range checks {
		status[c.Name] = "ok"
		if errs[i] != nil {
			s.logger(r).Warn("readiness: "+c.Name+" does not answer", "err", errs[i])
			status[c.Name] = "unavailable"
			down = append(down, c.Name)
		}
	}
	if len(down) > 0 {
		verb := " does not answer"
		if len(down) > 1 {
			verb = " do not answer"
		}
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{
			"status": "unavailable",
			"checks": status,
			"error":  errorBody{Code: "unavailable", Message: strings.Join(down, ", ") + verb, RequestID: requestID(r.Context())},
		})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "checks": status})
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }
