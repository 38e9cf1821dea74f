package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
)

// FloodConfig is one submission flood: Clients post batches of Batch texts
// to one account of Rate msg/s, back to back, for Duration.
type FloodConfig struct {
	Clients  int
	Batch    int
	Duration time.Duration
	Rate     float64
	// Unbounded lifts the queue bounds and the per-key request limit to
	// their maxima: the gateway as it was without backpressure, the
	// baseline of the same run.
	Unbounded bool
	// QueueMaxDepth, when positive, is the gateway's queue_max_depth.
	QueueMaxDepth int
	// Serve, when set, is the command line that runs the wamux binary
	// (e.g. its path): after the flood the gateway is stopped and
	// `serve` started on the same data in a child process, timed until
	// /readyz answers 200, its peak RSS (VmHWM) read then.
	Serve []string
	// Env is added to the child's environment (tests set their re-exec
	// switch here).
	Env []string
}

// FloodReport is what a flood measured.
type FloodReport struct {
	Clients     int     `json:"clients"`
	Batch       int     `json:"batch"`
	DurationSec float64 `json:"duration_sec"`
	Rate        float64 `json:"rate_per_sec"`
	Unbounded   bool    `json:"unbounded"`
	Requests    int64   `json:"requests"`
	Accepted    int64   `json:"accepted"`
	// Refused counts items answered 429-equivalent (queue_full,
	// rate_limited); Other any other per-item or request error.
	Refused         int64          `json:"refused"`
	RefusedByCode   map[string]int `json:"refused_by_code"`
	Other           int64          `json:"other_errors"`
	RetryAfterMin   int            `json:"retry_after_min_sec"`
	RetryAfterMax   int            `json:"retry_after_max_sec"`
	Stored          int            `json:"stored"`
	QueueDepth      map[string]int `json:"queue_depth"`
	PeakRSSMiB      float64        `json:"peak_rss_mib"`
	RestartSec      float64        `json:"restart_sec,omitempty"`
	RestartRSSMiB   float64        `json:"restart_peak_rss_mib,omitempty"`
	RestartQueued   map[string]int `json:"restart_queue_depth,omitempty"`
	StoredNotAccept int            `json:"stored_not_accepted"`
}

const floodAccount = "flood"

// RunFlood floods one account and reports what was accepted, refused and
// stored, and the process's peak RSS (VmHWM: the clients, the simulator
// and the gateway share the process). Every accepted item must be stored
// and nothing refused may be: StoredNotAccept counts the difference.
func RunFlood(ctx context.Context, cfg FloodConfig) (*FloodReport, error) {
	if cfg.Clients <= 0 || cfg.Batch <= 0 || cfg.Duration <= 0 || cfg.Rate <= 0 {
		return nil, errors.New("bench flood: clients, batch, duration and rate must be positive")
	}
	dir, err := os.MkdirTemp("", "wamux-flood-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	settings := map[string]any{"pair_interval": "1ms", "pair_burst": 1000}
	if cfg.Unbounded {
		settings["queue_max_depth"] = 10_000_000
		settings["queue_max_backlog"] = "168h"
		settings["queue_memory_mib"] = 1 << 20
		settings["key_rate"] = 1_000_000
		settings["key_burst"] = 1_000_000
	}
	if cfg.QueueMaxDepth > 0 {
		settings["queue_max_depth"] = cfg.QueueMaxDepth
	}
	h, err := Start(ctx, HarnessConfig{DataDir: dir, Settings: settings})
	if err != nil {
		return nil, err
	}
	closed := false
	defer func() {
		if !closed {
			h.Close()
		}
	}()
	burst := max(1, int(cfg.Rate))
	if err := h.AddAccount(ctx, floodAccount, "910001", cfg.Rate, burst, sim.Limits{Rate: 1000}); err != nil {
		return nil, err
	}
	rep := &FloodReport{Clients: cfg.Clients, Batch: cfg.Batch, DurationSec: cfg.Duration.Seconds(), Rate: cfg.Rate,
		Unbounded: cfg.Unbounded, RefusedByCode: map[string]int{}}
	if err := h.flood(ctx, cfg, rep); err != nil {
		return nil, err
	}
	rep.PeakRSSMiB = vmHWM(os.Getpid())
	var acc struct {
		QueueDepth map[string]int `json:"queue_depth"`
	}
	if err := h.Do(ctx, "GET", "/v1/accounts/"+floodAccount, nil, &acc); err != nil {
		return nil, err
	}
	rep.QueueDepth = acc.QueueDepth
	msgs, err := h.App.Store().ListMessages(ctx, store.MessageFilter{AccountID: floodAccount, Limit: 1 << 30})
	if err != nil {
		return nil, fmt.Errorf("bench flood: count stored messages: %w", err)
	}
	rep.Stored = len(msgs)
	rep.StoredNotAccept = rep.Stored - int(rep.Accepted)
	if len(cfg.Serve) == 0 {
		return rep, nil
	}
	h.Close()
	closed = true
	if err := restartServe(ctx, cfg, dir, h, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

type floodResult struct {
	Results []struct {
		MsgID string `json:"msg_id"`
		Error *struct {
			Code       string `json:"code"`
			RetryAfter int    `json:"retry_after"`
		} `json:"error"`
	} `json:"results"`
}

// flood runs the clients until cfg.Duration has passed.
func (h *Harness) flood(ctx context.Context, cfg FloodConfig, rep *FloodReport) error {
	// The clients stop starting requests at the deadline; requests in
	// flight then are answered and counted, so that what the gateway
	// stored can be compared with what it accepted.
	end := time.Now().Add(cfg.Duration)
	var (
		seq                 atomic.Int64
		mu                  sync.Mutex
		wg                  sync.WaitGroup
		firstErr            error
		retryMin, retryMax  = -1, 0
		requests, accepted  atomic.Int64
		refused, otherError atomic.Int64
	)
	note := func(code string, retry int) {
		mu.Lock()
		defer mu.Unlock()
		rep.RefusedByCode[code]++
		if retry > 0 && (retryMin < 0 || retry < retryMin) {
			retryMin = retry
		}
		retryMax = max(retryMax, retry)
	}
	for c := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var body bytes.Buffer
			for ctx.Err() == nil && time.Now().Before(end) {
				body.Reset()
				body.WriteString(`{"messages":[`)
				for i := range cfg.Batch {
					if i > 0 {
						body.WriteByte(',')
					}
					n := seq.Add(1)
					fmt.Fprintf(&body, `{"msg_id":"f%d-%d","biz_type":"bulk","account_id":%q,"to":"1555%07d","type":"text","text":{"body":"flood"}}`,
						c, n, floodAccount, n%10_000_000)
				}
				body.WriteString(`]}`)
				var out floodResult
				status, err := h.post(ctx, "/v1/messages:batch", body.Bytes(), &out)
				requests.Add(1)
				switch {
				case err != nil:
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				case status == http.StatusTooManyRequests:
					refused.Add(int64(cfg.Batch))
					note("rate_limited", 1)
					continue
				case status != http.StatusOK:
					otherError.Add(int64(cfg.Batch))
					continue
				}
				for _, r := range out.Results {
					switch {
					case r.Error == nil:
						accepted.Add(1)
					case r.Error.Code == "queue_full" || r.Error.Code == "rate_limited":
						refused.Add(1)
						note(r.Error.Code, r.Error.RetryAfter)
					default:
						otherError.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	rep.Requests, rep.Accepted, rep.Refused, rep.Other = requests.Load(), accepted.Load(), refused.Load(), otherError.Load()
	rep.RetryAfterMin, rep.RetryAfterMax = max(retryMin, 0), retryMax
	return firstErr
}

// post sends body and decodes a 200 answer into out; other statuses are
// returned without an error.
func (h *Harness) post(ctx context.Context, path string, body []byte, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", h.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+h.APIKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := h.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, res.Body)
		return res.StatusCode, nil
	}
	return res.StatusCode, json.NewDecoder(res.Body).Decode(out)
}

// restartServe starts `wamux serve` on the flood's data directory and
// times it until /readyz answers 200.
func restartServe(ctx context.Context, cfg FloodConfig, dir string, h *Harness, rep *FloodReport) error {
	addr := FreePort()
	args := append(append([]string{}, cfg.Serve[1:]...), "serve", "--insecure-dev", "--listen", addr, "--data-dir", dir)
	cmd := exec.CommandContext(ctx, cfg.Serve[0], args...)
	cmd.Env = append(append(os.Environ(), cfg.Env...), "WAMUX_API_KEYS="+h.APIKey, "WAMUX_APP_SECRET="+h.AppSecret,
		"WAMUX_LOG_LEVEL=error", "WAMUX_PROVIDER_BASE_URLS=http://127.0.0.1")
	cmd.Dir = filepath.Dir(dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("bench flood: start serve: %w", err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	client := &http.Client{Timeout: time.Second}
	deadline := start.Add(5 * time.Minute)
	for {
		res, err := client.Get("http://" + addr + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("bench flood: restarted gateway not ready: %s", strings.TrimSpace(stderr.String()))
		}
		time.Sleep(10 * time.Millisecond) // polling a child process's readiness
	}
	rep.RestartSec = time.Since(start).Seconds()
	rep.RestartRSSMiB = vmHWM(cmd.Process.Pid)
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/v1/accounts/"+floodAccount, nil)
	req.Header.Set("Authorization", "Bearer "+h.APIKey)
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("bench flood: restarted gateway: %w", err)
	}
	defer res.Body.Close()
	var acc struct {
		QueueDepth map[string]int `json:"queue_depth"`
	}
	if err := json.NewDecoder(res.Body).Decode(&acc); err != nil {
		return fmt.Errorf("bench flood: restarted gateway's account: %w", err)
	}
	rep.RestartQueued = acc.QueueDepth
	return nil
}

// vmHWM is a process's peak resident set in MiB (0 where /proc has none).
func vmHWM(pid int) float64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}
