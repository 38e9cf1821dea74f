package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/internal/baseurl"
)

// newBaseURLServer serves accounts with allowed as the provider
// allow-list (the zero List: the default).
func newBaseURLServer(t *testing.T, allowed baseurl.List) *fullServer {
	t.Helper()
	st, logs, log := openAccountStore(t)
	api, err := httpapi.New(httpapi.Config{Store: st, Registry: prometheus.NewRegistry(), APIKeys: []string{testKey},
		Logger: log, ProviderBaseURLs: allowed})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &fullServer{api: api, srv: srv, store: st, logs: logs}
}

// TestBaseURLOutsideAllowListRefused: with the default list only Meta's
// Graph API is taken; loopback, private and other hosts are refused on
// create and on change with 400 naming the list, and nothing is stored.
func TestBaseURLOutsideAllowListRefused(t *testing.T) {
	f := newBaseURLServer(t, baseurl.List{})
	for _, u := range []string{"http://127.0.0.1:8090", "http://10.0.0.1", "https://graph.facebook.com.evil.example",
		"http://graph.facebook.com", "https://evil.example/graph.facebook.com", "http://[::1]:9"} {
		r := f.do(t, "POST", "/v1/accounts", "application/json",
			`{"id":"acc2","phone_number_id":"2","access_token":"t","base_url":"`+u+`"}`)
		if r.status != http.StatusBadRequest || errorOf(t, r) != "invalid" || !strings.Contains(errorMessage(t, r), "https://graph.facebook.com") {
			t.Errorf("create at %s: %d %s, want 400 naming the allowed list", u, r.status, r.body)
		}
		r = f.do(t, "PATCH", "/v1/accounts/acc1", "application/json", `{"base_url":"`+u+`","rate_per_sec":5}`)
		if r.status != http.StatusBadRequest || !strings.Contains(errorMessage(t, r), "WAMUX_PROVIDER_BASE_URLS") {
			t.Errorf("change to %s: %d %s, want 400", u, r.status, r.body)
		}
	}
	a, err := f.store.GetAccount(context.Background(), "acc1")
	if err != nil || a.BaseURL != wamux.DefaultBaseURL || a.RatePerSec != 80 {
		t.Errorf("refused changes changed the account: %+v, %v", a, err)
	}
	if all, _ := f.store.ListAccounts(context.Background()); len(all) != 1 {
		t.Errorf("refused creates stored %d accounts", len(all)-1)
	}
	// Without base_url the account sends to the Graph API, which the
	// default list allows.
	if r := f.do(t, "POST", "/v1/accounts", "application/json", `{"id":"acc3","phone_number_id":"3","access_token":"t"}`); r.status != http.StatusCreated {
		t.Errorf("create at the default base_url: %d %s", r.status, r.body)
	}
}

// TestBaseURLInsideAllowList: an entry with a port allows that port, an
// entry without one any port of its host; the change is logged with the
// old and new base_url, never the token.
func TestBaseURLInsideAllowList(t *testing.T) {
	f := newBaseURLServer(t, baseurl.MustParse("https://graph.facebook.com,http://127.0.0.1:8090,http://sim.internal"))
	if r := f.do(t, "POST", "/v1/accounts", "application/json",
		`{"id":"acc2","phone_number_id":"2","access_token":"`+testToken+`","base_url":"http://127.0.0.1:8090"}`); r.status != http.StatusCreated {
		t.Fatalf("create at the simulator: %d %s", r.status, r.body)
	}
	if r := f.do(t, "PATCH", "/v1/accounts/acc2", "application/json", `{"base_url":"http://127.0.0.1:8091"}`); r.status != http.StatusBadRequest {
		t.Errorf("change to another port: %d %s, want 400", r.status, r.body)
	}
	if r := f.do(t, "PATCH", "/v1/accounts/acc2", "application/json", `{"base_url":"http://sim.internal:7000","access_token":"`+testToken+`x"}`); r.status != http.StatusOK {
		t.Fatalf("change to any port of a host listed without one: %d %s", r.status, r.body)
	}
	if a, _ := f.store.GetAccount(context.Background(), "acc2"); a.BaseURL != "http://sim.internal:7000" {
		t.Errorf("base_url = %s", a.BaseURL)
	}
	if r := f.do(t, "PATCH", "/v1/accounts/acc2", "application/json", `{"rate_per_sec":3}`); r.status != http.StatusOK {
		t.Fatalf("change of the rate: %d %s", r.status, r.body)
	}
	var changed []map[string]any
	for _, l := range logLines(t, f.logs.String()) {
		if l["msg"] == "account changed" {
			changed = append(changed, l)
		}
	}
	if len(changed) != 2 {
		t.Fatalf("%d account changed lines, want 2", len(changed))
	}
	if changed[0]["base_url_changed"] != true || changed[0]["base_url_old"] != "http://127.0.0.1:8090" ||
		changed[0]["base_url_new"] != "http://sim.internal:7000" || changed[0]["token_changed"] != true {
		t.Errorf("the base_url change is logged as %v", changed[0])
	}
	if changed[1]["base_url_changed"] != false || changed[1]["base_url_new"] != nil {
		t.Errorf("a rate change is logged as %v", changed[1])
	}
	if strings.Contains(f.logs.String(), testToken) {
		t.Error("the access token is in the logs")
	}
}

// logLines decodes JSON log output.
func logLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}
