package agent

import (
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/wamux/wamux"
)

// Defaults for Config fields left zero.
const (
	FlushIntervalDefault = 200 * time.Millisecond
	FlushEventsDefault   = 50
	// MaxBatchDefault lets a backlog (after an outage or a restart) drain
	// in large requests instead of FlushEvents at a time.
	MaxBatchDefault       = 500
	LRUSizeDefault        = 5000
	BackoffBaseDefault    = 250 * time.Millisecond
	BackoffCapDefault     = 30 * time.Second
	RequestTimeoutDefault = 10 * time.Second
	SegmentBytesDefault   = 4 << 20
)

// MaxBatchLimit keeps one request under the gateway's 8 MiB body limit
// whatever the ids hold: a receipt takes at most about 6.3 KiB on the wire
// (MaxMessageIDLen bytes, each escaped to six in the worst case, plus the
// other fields); real wamids need a hundred bytes.
const MaxBatchLimit = 1000

// MaxAccountIDLen bounds the account id, which every request carries
// once: the gateway's bound (wamux.ValidAccountID).
const MaxAccountIDLen = wamux.MaxAccountIDLen

// Config configures an Agent. GatewayURL, APIKey, AccountID and SpoolDir are
// required; every other zero field takes its default.
type Config struct {
	// GatewayURL is the base URL of the gateway, e.g. "https://wamux:8080";
	// the agent posts to GatewayURL + "/v1/receipts:batch".
	GatewayURL string
	// APIKey is sent as a bearer token. It never appears in logs or errors.
	APIKey string
	// AccountID is the account every reported receipt belongs to.
	AccountID string
	// SpoolDir holds the durable spool. One agent at a time may use it,
	// and only agents of the account whose receipts it still holds (see
	// the package documentation, "Spool layout").
	SpoolDir string

	// FlushInterval is the longest a durable receipt waits before a send
	// starts (unless a send is already retrying).
	FlushInterval time.Duration
	// FlushEvents starts a send early once this many receipts are waiting.
	FlushEvents int
	// MaxBatch bounds the receipts in one request.
	MaxBatch int
	// LRUSize is how many recent (message_id, type) pairs are remembered to
	// drop repeats before they reach the spool.
	LRUSize int
	// BackoffBase and BackoffCap shape the retry delay: attempt n waits a
	// uniformly random time in [0, min(BackoffCap, BackoffBase·2ⁿ)).
	BackoffBase time.Duration
	BackoffCap  time.Duration
	// RequestTimeout bounds one attempt, so a gateway that hangs costs a
	// retry, not the agent.
	RequestTimeout time.Duration
	// SegmentBytes is the size after which the spool starts a new segment;
	// fully acknowledged segments are deleted.
	SegmentBytes int64

	// HTTPClient sends the requests; http.DefaultClient when nil.
	HTTPClient *http.Client
	// Logger receives warnings and errors; slog.Default() when nil.
	Logger *slog.Logger
	// Clock times the backoff between attempts and is what Report checks
	// an event_time against (wamux.MaxEventTimeAhead); the real clock when
	// nil. Tests inject one to see the delays without waiting for them.
	Clock Clock
}

// Clock is the time source of the retry backoff and of Report's check of
// an event_time: wamux.Clock, and a channel that delivers once d has
// passed on it.
type Clock interface {
	wamux.Clock
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// withDefaults returns cfg with zero fields set to their defaults, or an
// EInvalid error naming the first field that is wrong.
func (cfg Config) withDefaults() (Config, error) {
	if err := validateGatewayURL(cfg.GatewayURL); err != nil {
		return cfg, err
	}
	if cfg.APIKey == "" {
		return cfg, wamux.Errorf(wamux.EInvalid, "agent: APIKey is required")
	}
	if strings.ContainsFunc(cfg.APIKey, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		// Checked here so that the HTTP client never rejects (and quotes)
		// the header later.
		return cfg, wamux.Errorf(wamux.EInvalid, "agent: APIKey must not contain spaces or control characters")
	}
	if !wamux.ValidAccountID(cfg.AccountID) {
		// The gateway refuses a batch for any other id: each would be
		// dead-lettered.
		return cfg, wamux.Errorf(wamux.EInvalid, "agent: AccountID must be an account's id: 1 to %d letters, digits, '_', '-' or '.', starting with a letter or digit", MaxAccountIDLen)
	}
	if cfg.SpoolDir == "" {
		return cfg, wamux.Errorf(wamux.EInvalid, "agent: SpoolDir is required")
	}
	if cfg.FlushInterval < 0 || cfg.FlushEvents < 0 || cfg.MaxBatch < 0 || cfg.LRUSize < 0 ||
		cfg.BackoffBase < 0 || cfg.BackoffCap < 0 || cfg.RequestTimeout < 0 || cfg.SegmentBytes < 0 {
		return cfg, wamux.Errorf(wamux.EInvalid, "agent: sizes and durations must not be negative")
	}
	setDefault(&cfg.FlushInterval, FlushIntervalDefault)
	setDefault(&cfg.FlushEvents, FlushEventsDefault)
	setDefault(&cfg.MaxBatch, MaxBatchDefault)
	setDefault(&cfg.LRUSize, LRUSizeDefault)
	setDefault(&cfg.BackoffBase, BackoffBaseDefault)
	setDefault(&cfg.BackoffCap, BackoffCapDefault)
	setDefault(&cfg.RequestTimeout, RequestTimeoutDefault)
	setDefault(&cfg.SegmentBytes, SegmentBytesDefault)
	if cfg.MaxBatch > MaxBatchLimit {
		return cfg, wamux.Errorf(wamux.EInvalid, "agent: MaxBatch must be at most %d, got %d", MaxBatchLimit, cfg.MaxBatch)
	}
	if cfg.FlushEvents > cfg.MaxBatch {
		return cfg, wamux.Errorf(wamux.EInvalid, "agent: FlushEvents (%d) must not exceed MaxBatch (%d)", cfg.FlushEvents, cfg.MaxBatch)
	}
	if cfg.BackoffCap < cfg.BackoffBase {
		return cfg, wamux.Errorf(wamux.EInvalid, "agent: BackoffCap (%s) must not be below BackoffBase (%s)", cfg.BackoffCap, cfg.BackoffBase)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	return cfg, nil
}

func setDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// validateGatewayURL accepts an absolute http(s) URL without credentials or
// query: credentials belong in APIKey, where they stay out of logs.
func validateGatewayURL(s string) error {
	if s == "" {
		return wamux.Errorf(wamux.EInvalid, "agent: GatewayURL is required")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return wamux.Errorf(wamux.EInvalid, "agent: GatewayURL must be an absolute http or https URL")
	}
	// A bare "?" or "#" parses to an empty query or fragment, but the
	// batch path appended after it would land in it.
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(s, "?#") {
		return wamux.Errorf(wamux.EInvalid, "agent: GatewayURL must not carry credentials, a query or a fragment")
	}
	return nil
}

// endpoint is the batch URL under the gateway base URL.
func endpoint(base string) string {
	return strings.TrimRight(base, "/") + "/v1/receipts:batch"
}
