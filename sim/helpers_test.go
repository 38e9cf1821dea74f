package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux/sim"
)

const (
	num   = "106540352242922"
	token = "tok-abc-123"
)

// clock is a settable clock for the simulator's rate accounting.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_750_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// harness is a simulator served over real HTTP.
type harness struct {
	t   *testing.T
	s   *sim.Server
	url string
	clk *clock
}

func start(t *testing.T, cfg sim.Config) *harness {
	t.Helper()
	if cfg.Numbers == nil {
		cfg.Numbers = []sim.Number{{PhoneNumberID: num, AccessToken: token}}
	}
	clk := newClock()
	if cfg.Clock == nil {
		cfg.Clock = clk.Now
	}
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { s.Close() })
	return &harness{t: t, s: s, url: ts.URL, clk: clk}
}

// send posts a raw body to the send endpoint.
func (h *harness) send(id, tok, body string) (int, []byte, http.Header) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+"/v24.0/"+id+"/messages", bytes.NewBufferString(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

func text(to, cb string) string {
	m := map[string]any{"messaging_product": "whatsapp", "to": to, "type": "text", "text": map[string]any{"body": "hi"}}
	if cb != "" {
		m["biz_opaque_callback_data"] = cb
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func (h *harness) get(path string, v any) {
	h.t.Helper()
	resp, err := http.Get(h.url + path)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		h.t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		h.t.Fatal(err)
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}
