package sim_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/sim"
)

const (
	num   = "106540352242922"
	token = "tok-abc-123"
)

// harness is a simulator served over real HTTP.
type harness struct {
	t   *testing.T
	s   *sim.Server
	url string
	clk *fakeclock.Clock
}

func start(t *testing.T, cfg sim.Config) *harness {
	t.Helper()
	return startClock(t, cfg, false)
}

// startWithAfter is start with the fake clock's After as the sim's, for
// the inbound traffic.
func startWithAfter(t *testing.T, cfg sim.Config) *harness {
	t.Helper()
	return startClock(t, cfg, true)
}

func startClock(t *testing.T, cfg sim.Config, after bool) *harness {
	t.Helper()
	if cfg.Numbers == nil {
		cfg.Numbers = []sim.Number{{PhoneNumberID: num, AccessToken: token}}
	}
	clk := fakeclock.NewAt(time.Unix(1_750_000_000, 0))
	if cfg.Clock == nil {
		cfg.Clock = clk.Now
	}
	if after {
		cfg.After = clk.After
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
