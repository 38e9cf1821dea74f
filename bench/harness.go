// Package bench runs wamux against its Cloud API simulator in one process
// and measures it from the simulator's ground truth: what `wamux bench`
// and `wamux demo` print.
package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux/app"
	"github.com/wamux/wamux/config"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store/postgres"
)

// HarnessConfig describes one gateway + simulator pair.
type HarnessConfig struct {
	// DataDir holds the gateway's SQLite file; empty means a temporary
	// directory removed by Close.
	DataDir string
	// Listen is the gateway's address; default 127.0.0.1:0.
	Listen string
	// Store is "sqlite" (default) or a PostgreSQL URL; on PostgreSQL the
	// gateway works in a schema of its own, dropped by Close, so that
	// runs on one database never meet each other's rows.
	Store  string
	Sim    sim.Config
	Logger *slog.Logger
	// ClientTimeout bounds one provider call; shorter than the simulator's
	// slow answers, so that those become unknown outcomes.
	ClientTimeout time.Duration
	// Settings are applied through PATCH /v1/config before traffic.
	Settings map[string]any
	// Bloom sizes the receipt pipeline's Bloom filter (zero: defaults).
	Bloom receipts.BloomConfig
	// EventAllowNetworks are the CIDRs event subscriptions may point into
	// besides public addresses (config.EventAllowNetworks).
	EventAllowNetworks string
	// InboundPruneEvery is how often the gateway deletes inbound messages
	// past their retention (zero: its default).
	InboundPruneEvery time.Duration
}

// Harness is a running gateway and simulator.
type Harness struct {
	App    *app.App
	Sim    *sim.Server
	URL    string // gateway base URL
	SimURL string
	APIKey string
	// AppSecret signs webhooks the gateway accepts.
	AppSecret string
	http      *http.Client
	tmp       string
	// dropSchema removes the PostgreSQL schema of the run, if any.
	dropSchema func()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// randomKey is a WAMUX_SECRET_KEY: the base64 of 32 random bytes.
func randomKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// Start brings up the gateway, then the simulator with its webhooks aimed
// at the gateway.
func Start(ctx context.Context, cfg HarnessConfig) (*Harness, error) {
	h := &Harness{APIKey: "bench-" + randomHex(16), http: &http.Client{Timeout: 60 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.DataDir == "" {
		dir, err := os.MkdirTemp("", "wamux-bench-")
		if err != nil {
			return nil, err
		}
		h.tmp, cfg.DataDir = dir, dir
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.ClientTimeout == 0 {
		cfg.ClientTimeout = 2 * time.Second
	}
	secret := randomHex(16)
	c := config.Default()
	c.Listen, c.DataDir, c.APIKeys, c.AppSecret, c.VerifyToken = cfg.Listen, cfg.DataDir, []string{h.APIKey}, secret, randomHex(8)
	if cfg.Store != "" && cfg.Store != "sqlite" {
		url, drop, err := benchSchema(ctx, cfg.Store)
		if err != nil {
			h.cleanup()
			return nil, err
		}
		c.Store, h.dropSchema = url, drop
	}
	c.EventAllowNetworks = cfg.EventAllowNetworks
	if h.tmp != "" {
		// A throw-away data dir gets a throw-away key; a given one keeps
		// its key file (secret.key), so its sealed tokens open next time.
		c.SecretKey = randomKey()
	}
	// Accounts point at the simulator, which listens on a port of
	// 127.0.0.1 chosen after the gateway starts.
	c.ProviderBaseURLs = "http://127.0.0.1"
	client, err := cloudapi.New(cloudapi.Config{Timeout: cfg.ClientTimeout})
	if err != nil {
		return nil, err
	}
	a := app.New(c, cfg.Logger)
	a.Provider = client
	a.ReceiptBloom = cfg.Bloom
	a.InboundPruneEvery = cfg.InboundPruneEvery
	h.AppSecret = secret
	if err := a.Start(ctx); err != nil {
		h.cleanup()
		return nil, err
	}
	h.App, h.URL = a, "http://"+a.Addr()

	simCfg := cfg.Sim
	simCfg.Webhooks.URL = h.URL + "/webhook"
	simCfg.Webhooks.AppSecret = secret
	if simCfg.Logger == nil {
		simCfg.Logger = cfg.Logger
	}
	s, err := sim.New(simCfg)
	if err != nil {
		h.Close()
		return nil, err
	}
	h.Sim = s
	if h.SimURL, err = s.Start(ctx, "127.0.0.1:0"); err != nil {
		h.Close()
		return nil, err
	}
	if len(cfg.Settings) > 0 {
		if err := h.Do(ctx, "PATCH", "/v1/config", cfg.Settings, nil); err != nil {
			h.Close()
			return nil, fmt.Errorf("apply settings: %w", err)
		}
	}
	return h, nil
}

// Registry exposes the gateway's metrics.
func (h *Harness) Registry() *prometheus.Registry { return h.App.Registry() }

// AddAccount registers a number with the simulator (Meta's limits) and
// creates the account in the gateway (its own limits; a burst of 0 leaves
// it to the API's default).
func (h *Harness) AddAccount(ctx context.Context, id, pnid string, rate float64, burst int, simLimits sim.Limits) error {
	token := "tok-" + randomHex(12)
	if err := h.Sim.AddNumber(sim.Number{PhoneNumberID: pnid, AccessToken: token, Limits: simLimits}); err != nil {
		return err
	}
	body := map[string]any{"id": id, "phone_number_id": pnid, "access_token": token, "base_url": h.SimURL, "rate_per_sec": rate}
	if burst > 0 {
		body["burst"] = burst
	}
	return h.Do(ctx, "POST", "/v1/accounts", body, nil)
}

// Do sends one API request and decodes a 2xx answer into out.
func (h *Harness) Do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.URL+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+h.APIKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := h.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, bytes.TrimSpace(raw))
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// PostWebhook signs body with the app secret and posts it to /webhook, as
// Meta would.
func (h *Harness) PostWebhook(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, "POST", h.URL+"/webhook", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hub-Signature-256", cloudapi.Sign(body, h.AppSecret))
	res, err := h.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /webhook: %d %s", res.StatusCode, bytes.TrimSpace(raw))
	}
	return nil
}

// PostForgedWebhook posts body signed under another secret than the app
// secret, as a forger would, and checks that it is refused (401).
func (h *Harness) PostForgedWebhook(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, "POST", h.URL+"/webhook", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hub-Signature-256", cloudapi.Sign(body, "not-"+h.AppSecret))
	res, err := h.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusUnauthorized {
		return fmt.Errorf("POST /webhook signed under another secret: %d %s, want 401", res.StatusCode, bytes.TrimSpace(raw))
	}
	return nil
}

// Close stops the simulator and the gateway.
func (h *Harness) Close() error {
	if h.Sim != nil {
		h.Sim.Close()
	}
	if h.App != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.App.Stop(ctx)
	}
	h.cleanup()
	return nil
}

func (h *Harness) cleanup() {
	if h.tmp != "" {
		os.RemoveAll(h.tmp)
	}
	if h.dropSchema != nil {
		h.dropSchema()
	}
}

// benchSchema creates a schema of its own for one run on the PostgreSQL
// server spec names and returns the URL that makes it the search_path,
// and a drop that removes it with everything in it (a failed drop is
// reported on stderr: the schema outlives the run).
func benchSchema(ctx context.Context, spec string) (string, func(), error) {
	if !strings.HasPrefix(spec, "postgres://") && !strings.HasPrefix(spec, "postgresql://") {
		return "", nil, fmt.Errorf(`--store must be "sqlite" or a PostgreSQL URL`)
	}
	url, drop, err := postgres.FreshSchema(ctx, spec, "wamux_bench_")
	if err != nil {
		return "", nil, err
	}
	return url, func() {
		if err := drop(); err != nil {
			fmt.Fprintf(os.Stderr, "wamux bench: %v\n", err)
		}
	}, nil
}

// FreePort is a loopback address nobody listens on right now.
func FreePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer ln.Close()
	return ln.Addr().String()
}
