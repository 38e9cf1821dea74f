package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/receipts"
)

// WebhookConfig configures `wamux bench webhook`.
type WebhookConfig struct {
	// Posts per handler; Statuses per POST; Concurrency POSTs in flight.
	Posts       int
	Statuses    int
	Concurrency int
	// Store is "sqlite" or a PostgreSQL URL, as for RunReceipts.
	Store string
	// WAMIDs is WAMIDsRandom (the default) or WAMIDsSequential.
	WAMIDs string
	// Rounds splits the POSTs into this many parts, each sent to the bare
	// handler and then to the real one (default 5), so that a slow spell
	// of a shared machine weighs on both handlers instead of on whichever
	// ran during it.
	Rounds int
}

// WebhookReport compares the real webhook handler with a bare one.
type WebhookReport struct {
	Store           string  `json:"store"`
	Posts           int     `json:"posts"`
	StatusesPerPost int     `json:"statuses_per_post"`
	Concurrency     int     `json:"concurrency"`
	WAMIDs          string  `json:"wamids"`
	Rounds          int     `json:"rounds"`
	PostsPerSec     float64 `json:"posts_per_sec"`
	BarePostsPerSec float64 `json:"bare_posts_per_sec"`
	Ratio           float64 `json:"ratio_to_bare"`
	P50Ms           float64 `json:"latency_p50_ms"`
	P99Ms           float64 `json:"latency_p99_ms"`
	BareP50Ms       float64 `json:"bare_latency_p50_ms"`
	BareP99Ms       float64 `json:"bare_latency_p99_ms"`
	// CPUMicrosPerPost is the process's CPU time (user + system, HTTP
	// client included) per POST: for the real handler from the first POST
	// until every status is merged, for the bare one over its POSTs. On a
	// saturated machine the ratio of the rates follows the inverse ratio of
	// these, with less noise than the rates.
	CPUMicrosPerPost     float64 `json:"cpu_us_per_post"`
	BareCPUMicrosPerPost float64 `json:"bare_cpu_us_per_post"`
	// Processed is how many statuses the pipeline merged in the end (all
	// of them: every POST carries new ones).
	Processed int64 `json:"processed"`
}

const benchAppSecret = "bench-app-secret"

// webhookPhone is the phone number id every benchmark notification names.
const webhookPhone = "106540352242922"

// RunWebhook sends the same signed notifications, over loopback HTTP, to
// the real handler (signature, parse, account lookup, durable append on a
// real store, 200) and to a bare net/http handler that only reads the body
// and checks the HMAC, and reports POSTs per second of each. The POSTs go
// in cfg.Rounds parts, each to the bare handler and then to the real one.
func RunWebhook(ctx context.Context, cfg WebhookConfig) (WebhookReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return WebhookReport{}, err
	}
	rep := WebhookReport{Store: storeKind(cfg.Store), Posts: cfg.Posts, StatusesPerPost: cfg.Statuses, Concurrency: cfg.Concurrency,
		WAMIDs: cfg.WAMIDs, Rounds: cfg.Rounds}
	// The last warm bodies are distinct notifications for the warm-up, so
	// that none of the measured ones is a repeat the handler skips.
	warmN := 2 * cfg.Concurrency
	bodies, sigs := webhookBodies(cfg, cfg.Posts+warmN)

	bare := bareWebhookServer()
	defer bare.Close()
	real, err := startRealWebhook(ctx, cfg.Store)
	if err != nil {
		return rep, err
	}
	defer real.close()

	client := &http.Client{Transport: &http.Transport{MaxIdleConns: cfg.Concurrency * 2, MaxIdleConnsPerHost: cfg.Concurrency * 2}}
	defer client.CloseIdleConnections()
	// Warm both paths (connections, statement caches) before measuring.
	warm, warmSigs := bodies[cfg.Posts:], sigs[cfg.Posts:]
	bodies, sigs = bodies[:cfg.Posts], sigs[:cfg.Posts]
	for _, url := range []string{bare.URL, real.url} {
		if _, _, err := post(ctx, client, url, warm, warmSigs, cfg.Concurrency); err != nil {
			return rep, fmt.Errorf("bench webhook: warm-up: %w", err)
		}
	}
	if err := real.pipe.Flush(ctx); err != nil {
		return rep, err
	}
	warmApplied := real.pipe.Stats().Applied
	var bareRun, realRun webhookRun
	for r := range cfg.Rounds {
		lo, hi := r*len(bodies)/cfg.Rounds, (r+1)*len(bodies)/cfg.Rounds
		if err := bareRun.round(ctx, client, bare.URL, bodies[lo:hi], sigs[lo:hi], cfg.Concurrency, nil); err != nil {
			return rep, fmt.Errorf("bench webhook: bare handler: %w", err)
		}
		// The real handler's CPU runs until its statuses are merged; the
		// rate counts only the POSTs, as a sender sees it.
		if err := realRun.round(ctx, client, real.url, bodies[lo:hi], sigs[lo:hi], cfg.Concurrency, real.pipe.Flush); err != nil {
			return rep, fmt.Errorf("bench webhook: real handler: %w", err)
		}
	}
	n := float64(len(bodies))
	rep.BarePostsPerSec, rep.BareCPUMicrosPerPost, rep.BareP50Ms, rep.BareP99Ms = bareRun.figures(n)
	rep.PostsPerSec, rep.CPUMicrosPerPost, rep.P50Ms, rep.P99Ms = realRun.figures(n)
	rep.Ratio = rep.PostsPerSec / rep.BarePostsPerSec
	rep.Processed = real.pipe.Stats().Applied - warmApplied
	return rep, nil
}

// withDefaults fills the zero fields of cfg and checks WAMIDs.
func (cfg WebhookConfig) withDefaults() (WebhookConfig, error) {
	if cfg.Posts <= 0 {
		cfg.Posts = 100_000
	}
	if cfg.Statuses <= 0 {
		cfg.Statuses = 1
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 32
	}
	if cfg.Store == "" {
		cfg.Store = "sqlite"
	}
	if cfg.Rounds <= 0 {
		cfg.Rounds = 5
	}
	cfg.Rounds = min(cfg.Rounds, cfg.Posts)
	var err error
	cfg.WAMIDs, err = checkWAMIDs(cfg.WAMIDs)
	return cfg, err
}

// webhookBodies is n signed notifications of cfg.Statuses distinct
// delivered statuses each, and their signatures.
func webhookBodies(cfg WebhookConfig, n int) (bodies [][]byte, sigs []string) {
	bodies = make([][]byte, n)
	sigs = make([]string, n)
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	ids := wamids(cfg.WAMIDs, n*cfg.Statuses, 1)
	for i := range bodies {
		var sts []string
		for j := range cfg.Statuses {
			sts = append(sts, fmt.Sprintf(`{"id":"%s","status":"delivered","timestamp":"%d","recipient_id":"16505551234",`+
				`"biz_opaque_callback_data":"msg-%d-%d","pricing":{"billable":true,"pricing_model":"PMP","type":"regular","category":"utility"}}`,
				ids[i*cfg.Statuses+j], ts+int64(i), i, j))
		}
		bodies[i] = []byte(`{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp",` +
			`"metadata":{"display_phone_number":"15550783881","phone_number_id":"` + webhookPhone + `"},"statuses":[` + strings.Join(sts, ",") +
			`]},"field":"messages"}]}]}`)
		sigs[i] = cloudapi.Sign(bodies[i], benchAppSecret)
	}
	return bodies, sigs
}

// bareWebhookServer only reads the body and checks its signature.
func bareWebhookServer() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, httpapi.MaxBodyWebhook))
		if err != nil {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		if !cloudapi.VerifySignature(r.Header.Get(cloudapi.SignatureHeader), body, benchAppSecret) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
}

// realWebhook is the gateway's webhook handler on a real store, with the
// receipt pipeline behind it.
type realWebhook struct {
	url     string // the handler's URL
	pipe    *receipts.Pipeline
	cleanup []func() // in the order they run
}

// close stops the server, then the pipeline, then closes the store.
func (w *realWebhook) close() {
	for i := len(w.cleanup) - 1; i >= 0; i-- {
		w.cleanup[i]()
	}
}

// startRealWebhook opens the store named by storeSpec, creates the account
// the notifications name, and serves the webhook handler.
func startRealWebhook(ctx context.Context, storeSpec string) (_ *realWebhook, err error) {
	w := &realWebhook{}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	st, closeStore, err := openBenchStore(ctx, storeSpec)
	if err != nil {
		return nil, err
	}
	w.cleanup = append(w.cleanup, closeStore)
	if _, err := st.CreateAccount(ctx, wamux.Account{ID: "acc1", PhoneNumberID: webhookPhone, AccessToken: "bench-token",
		BaseURL: wamux.DefaultBaseURL, RatePerSec: 80, Burst: 80, State: wamux.AccountActive}); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	if w.pipe, err = receipts.New(receipts.Config{Store: st, Registry: reg}); err != nil {
		return nil, err
	}
	if err := w.pipe.Start(ctx); err != nil {
		return nil, err
	}
	w.cleanup = append(w.cleanup, func() { w.pipe.Stop(context.Background()) })
	api, err := httpapi.New(httpapi.Config{Store: st, Registry: reg, Logger: slog.New(slog.DiscardHandler),
		APIKeys: []string{"bench-key"}, Receipts: w.pipe, AppSecret: benchAppSecret})
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(api)
	w.cleanup = append(w.cleanup, srv.Close)
	w.url = srv.URL + "/webhook"
	return w, nil
}

// webhookRun adds up the rounds of one handler.
type webhookRun struct {
	secs float64
	cpu  time.Duration
	lat  []float64 // ms, per POST
}

// round posts bodies to url and adds the time, the process's CPU (until
// settle returns, when given) and the latencies. Each starts with a
// collected heap, so that no round pays for the garbage of the one before.
func (w *webhookRun) round(ctx context.Context, client *http.Client, url string, bodies [][]byte, sigs []string, concurrency int, settle func(context.Context) error) error {
	runtime.GC()
	cpu0 := processCPU()
	secs, lat, err := post(ctx, client, url, bodies, sigs, concurrency)
	if err != nil {
		return err
	}
	if settle != nil {
		if err := settle(ctx); err != nil {
			return err
		}
	}
	w.cpu += processCPU() - cpu0
	w.secs, w.lat = w.secs+secs, append(w.lat, lat...)
	return nil
}

// figures are the run's POSTs per second, CPU µs per POST and latency
// percentiles, for n POSTs.
func (w *webhookRun) figures(n float64) (perSec, cpuMicros, p50, p99 float64) {
	slices.Sort(w.lat)
	return n / w.secs, float64(w.cpu.Microseconds()) / n, percentile(w.lat, 0.5), percentile(w.lat, 0.99)
}

// post sends every body once with `concurrency` POSTs in flight and
// returns the elapsed seconds and each POST's latency in ms; any answer
// but 200 is an error.
func post(ctx context.Context, client *http.Client, url string, bodies [][]byte, sigs []string, concurrency int) (float64, []float64, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, concurrency)
	lats := make([][]float64, concurrency)
	start := time.Now()
	for c := range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(bodies) || ctx.Err() != nil {
					return
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(bodies[i]))
				if err != nil {
					errs[c] = err
					return
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(cloudapi.SignatureHeader, sigs[i])
				t := time.Now()
				res, err := client.Do(req)
				if err != nil {
					errs[c] = err
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					errs[c] = fmt.Errorf("POST answered %d", res.StatusCode)
					return
				}
				lats[c] = append(lats[c], float64(time.Since(t).Microseconds())/1000)
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return 0, nil, err
	}
	var all []float64
	for _, l := range lats {
		all = append(all, l...)
	}
	return secs, all, nil
}
