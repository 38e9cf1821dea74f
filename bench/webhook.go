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

// RunWebhook sends the same signed notifications, over loopback HTTP, to
// the real handler (signature, parse, account lookup, durable append on a
// real store, 200) and to a bare net/http handler that only reads the body
// and checks the HMAC, and reports POSTs per second of each. The POSTs go
// in cfg.Rounds parts, each to the bare handler and then to the real one.
func RunWebhook(ctx context.Context, cfg WebhookConfig) (WebhookReport, error) {
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
	if cfg.WAMIDs, err = checkWAMIDs(cfg.WAMIDs); err != nil {
		return WebhookReport{}, err
	}
	rep := WebhookReport{Store: storeKind(cfg.Store), Posts: cfg.Posts, StatusesPerPost: cfg.Statuses, Concurrency: cfg.Concurrency,
		WAMIDs: cfg.WAMIDs, Rounds: cfg.Rounds}
	const phone = "106540352242922"
	// The last warm bodies are distinct notifications for the warm-up, so
	// that none of the measured ones is a repeat the handler skips.
	warmN := 2 * cfg.Concurrency
	bodies := make([][]byte, cfg.Posts+warmN)
	sigs := make([]string, cfg.Posts+warmN)
	ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	ids := wamids(cfg.WAMIDs, len(bodies)*cfg.Statuses, 1)
	for i := range bodies {
		var sts []string
		for j := range cfg.Statuses {
			sts = append(sts, fmt.Sprintf(`{"id":"%s","status":"delivered","timestamp":"%d","recipient_id":"16505551234",`+
				`"biz_opaque_callback_data":"msg-%d-%d","pricing":{"billable":true,"pricing_model":"PMP","type":"regular","category":"utility"}}`,
				ids[i*cfg.Statuses+j], ts+int64(i), i, j))
		}
		bodies[i] = []byte(`{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp",` +
			`"metadata":{"display_phone_number":"15550783881","phone_number_id":"` + phone + `"},"statuses":[` + strings.Join(sts, ",") +
			`]},"field":"messages"}]}]}`)
		sigs[i] = cloudapi.Sign(bodies[i], benchAppSecret)
	}

	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	defer bare.Close()

	st, closeStore, err := openBenchStore(ctx, cfg.Store)
	if err != nil {
		return rep, err
	}
	defer closeStore()
	if _, err := st.CreateAccount(ctx, wamux.Account{ID: "acc1", PhoneNumberID: phone, AccessToken: "bench-token",
		BaseURL: wamux.DefaultBaseURL, RatePerSec: 80, Burst: 80, State: wamux.AccountActive}); err != nil {
		return rep, err
	}
	reg := prometheus.NewRegistry()
	pipe, err := receipts.New(receipts.Config{Store: st, Registry: reg})
	if err != nil {
		return rep, err
	}
	if err := pipe.Start(ctx); err != nil {
		return rep, err
	}
	defer pipe.Stop(context.Background())
	api, err := httpapi.New(httpapi.Config{Store: st, Registry: reg, Logger: slog.New(slog.DiscardHandler),
		APIKeys: []string{"bench-key"}, Receipts: pipe, AppSecret: benchAppSecret})
	if err != nil {
		return rep, err
	}
	real := httptest.NewServer(api)
	defer real.Close()

	client := &http.Client{Transport: &http.Transport{MaxIdleConns: cfg.Concurrency * 2, MaxIdleConnsPerHost: cfg.Concurrency * 2}}
	defer client.CloseIdleConnections()
	// Warm both paths (connections, statement caches) before measuring.
	warm, warmSigs := bodies[cfg.Posts:], sigs[cfg.Posts:]
	bodies, sigs = bodies[:cfg.Posts], sigs[:cfg.Posts]
	for _, url := range []string{bare.URL, real.URL + "/webhook"} {
		if _, _, err := post(ctx, client, url, warm, warmSigs, cfg.Concurrency); err != nil {
			return rep, fmt.Errorf("bench webhook: warm-up: %w", err)
		}
	}
	if err := pipe.Flush(ctx); err != nil {
		return rep, err
	}
	warmApplied := pipe.Stats().Applied
	var bareSecs, realSecs float64
	var bareCPU, realCPU time.Duration
	var bareLat, realLat []float64
	for r := range cfg.Rounds {
		lo, hi := r*len(bodies)/cfg.Rounds, (r+1)*len(bodies)/cfg.Rounds
		// Each phase starts with a collected heap, so that neither pays
		// for the garbage of the one before it.
		runtime.GC()
		cpu0 := processCPU()
		secs, lat, err := post(ctx, client, bare.URL, bodies[lo:hi], sigs[lo:hi], cfg.Concurrency)
		if err != nil {
			return rep, fmt.Errorf("bench webhook: bare handler: %w", err)
		}
		bareCPU += processCPU() - cpu0
		bareSecs, bareLat = bareSecs+secs, append(bareLat, lat...)
		// The real handler's CPU runs until its statuses are merged; the
		// rate counts only the POSTs, as a sender sees it.
		runtime.GC()
		cpu0 = processCPU()
		secs, lat, err = post(ctx, client, real.URL+"/webhook", bodies[lo:hi], sigs[lo:hi], cfg.Concurrency)
		if err != nil {
			return rep, fmt.Errorf("bench webhook: real handler: %w", err)
		}
		if err := pipe.Flush(ctx); err != nil {
			return rep, err
		}
		realCPU += processCPU() - cpu0
		realSecs, realLat = realSecs+secs, append(realLat, lat...)
	}
	rep.BarePostsPerSec = float64(len(bodies)) / bareSecs
	rep.PostsPerSec = float64(len(bodies)) / realSecs
	rep.Ratio = rep.PostsPerSec / rep.BarePostsPerSec
	rep.BareCPUMicrosPerPost = float64(bareCPU.Microseconds()) / float64(len(bodies))
	rep.CPUMicrosPerPost = float64(realCPU.Microseconds()) / float64(len(bodies))
	slices.Sort(bareLat)
	slices.Sort(realLat)
	rep.BareP50Ms, rep.BareP99Ms = percentile(bareLat, 0.5), percentile(bareLat, 0.99)
	rep.P50Ms, rep.P99Ms = percentile(realLat, 0.5), percentile(realLat, 0.99)
	rep.Processed = pipe.Stats().Applied - warmApplied
	return rep, nil
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
