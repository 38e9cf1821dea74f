package httpapi_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestDashboard: "/" serves the embedded page under a policy that allows
// only our own origin, its assets reference nothing outside, the state
// endpoint lists the account without its token, and unknown paths are 404.
func TestDashboard(t *testing.T) {
	b := newBundle(t)
	if r := b.json(t, "POST", "/v1/accounts", validAccount); r.status != 201 {
		t.Fatalf("create: %d", r.status)
	}
	r := b.do(t, "GET", "/", "", nil)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		t.Fatalf("dashboard: %d %s", r.status, r.header.Get("Content-Type"))
	}
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
		t.Fatalf("dashboard policy = %q", csp)
	}
	if !strings.Contains(string(r.body), `src="/ui/app.js"`) || !strings.Contains(string(r.body), `href="/ui/style.css"`) {
		t.Fatal("the page does not load its script and style sheet")
	}
	// Nothing may be fetched from elsewhere: no absolute URLs in src,
	// href, url() or @import, and no fetch of anything but /ui/state.
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|url\(\s*["']?(https?:)?//|@import|fetch\(\s*["'](https?:)?//`)
	for _, path := range []string{"/", "/ui/app.js", "/ui/style.css"} {
		a := b.do(t, "GET", path, "", nil)
		if a.status != 200 || len(a.body) == 0 {
			t.Fatalf("GET %s = %d", path, a.status)
		}
		if m := external.Find(a.body); m != nil {
			t.Errorf("%s references something outside: %q", path, m)
		}
	}
	if ct := b.do(t, "GET", "/ui/app.js", "", nil).header.Get("Content-Type"); !strings.Contains(ct, "javascript") {
		t.Errorf("app.js served as %q", ct)
	}

	s := b.do(t, "GET", "/ui/state", "", nil)
	if s.status != 200 || strings.Contains(string(s.body), testToken) {
		t.Fatalf("state: %d (or it shows the token)", s.status)
	}
	var state struct {
		Time     int64 `json:"time"`
		Accounts []struct {
			ID         string         `json:"id"`
			State      string         `json:"state"`
			RatePerSec float64        `json:"rate_per_sec"`
			QueueDepth map[string]int `json:"queue_depth"`
		} `json:"accounts"`
		Gateway map[string]json.RawMessage `json:"gateway"`
	}
	if err := json.Unmarshal(s.body, &state); err != nil {
		t.Fatalf("state: %v\n%s", err, s.body)
	}
	if state.Time == 0 || len(state.Accounts) != 1 || state.Accounts[0].ID != "acme-1" ||
		state.Accounts[0].State != "active" || state.Accounts[0].RatePerSec != 40 || len(state.Accounts[0].QueueDepth) != 3 {
		t.Fatalf("state accounts: %+v", state)
	}
	for _, k := range []string{"receipts_received", "dedup_hits", "late_receipts", "dead_letters", "receipt_latency", "stream_lag_seconds"} {
		if _, ok := state.Gateway[k]; !ok {
			t.Errorf("state.gateway lacks %q", k)
		}
	}

	for _, path := range []string{"/nothing", "/ui/index.html", "/ui/nothing.js", "/ui/../server.go"} {
		if r := b.do(t, "GET", path, "", nil); r.status != 404 {
			t.Errorf("GET %s = %d, want 404", path, r.status)
		}
	}
}
