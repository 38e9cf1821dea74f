package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/sqlite"
)

const (
	testKey   = "test-api-key-0123456789"
	testToken = "EAAGsecretTOKENvalue987654321"
)

// syncBuffer collects log output from concurrent handlers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type bundle struct {
	srv   *httptest.Server
	store store.Store
	logs  *syncBuffer
}

func newBundle(t *testing.T) *bundle {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "wamux.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logs := &syncBuffer{}
	api, err := httpapi.New(httpapi.Config{
		Store:    st,
		Logger:   slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registry: prometheus.NewRegistry(),
		APIKeys:  []string{"another-key-abcdefgh", testKey},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &bundle{srv: srv, store: st, logs: logs}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (b *bundle) do(t *testing.T, method, path, key string, body io.Reader, hdr ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, b.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: raw}
}

func (b *bundle) json(t *testing.T, method, path, body string) response {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	return b.do(t, method, path, testKey, r, "Content-Type", "application/json")
}

// errorOf checks the error envelope and returns its code.
func errorOf(t *testing.T, r response) string {
	t.Helper()
	var env struct {
		Error struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			RequestID string `json:"request_id"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil {
		t.Fatalf("status %d: body is not the JSON error envelope: %s", r.status, r.body)
	}
	if env.Error.Code == "" || env.Error.Message == "" {
		t.Fatalf("status %d: error envelope lacks code or message: %s", r.status, r.body)
	}
	if env.Error.RequestID == "" || env.Error.RequestID != r.header.Get("X-Request-Id") {
		t.Fatalf("error request_id %q does not match X-Request-Id %q", env.Error.RequestID, r.header.Get("X-Request-Id"))
	}
	return env.Error.Code
}

const validAccount = `{"id":"acme-1","phone_number_id":"106540352242922","access_token":"` + testToken + `","rate_per_sec":40}`

func TestHealthAndReadiness(t *testing.T) {
	b := newBundle(t)
	if r := b.do(t, "GET", "/healthz", "", nil); r.status != 200 {
		t.Fatalf("/healthz = %d", r.status)
	}
	if r := b.do(t, "GET", "/readyz", "", nil); r.status != 200 {
		t.Fatalf("/readyz = %d %s", r.status, r.body)
	}
	b.store.Close()
	if r := b.do(t, "GET", "/readyz", "", nil); r.status != 503 {
		t.Fatalf("/readyz with the store closed = %d, want 503", r.status)
	}
}

func TestAPIKeyRequired(t *testing.T) {
	b := newBundle(t)
	for name, key := range map[string]string{"none": "", "wrong": "test-api-key-0123456780", "prefix": testKey[:10]} {
		r := b.do(t, "GET", "/v1/accounts", key, nil)
		if r.status != 401 || errorOf(t, r) != "unauthorized" {
			t.Errorf("%s key: status %d %s, want 401 unauthorized", name, r.status, r.body)
		}
	}
	r := b.do(t, "POST", "/v1/accounts", "", strings.NewReader(validAccount))
	if r.status != 401 {
		t.Fatalf("unauthenticated create = %d", r.status)
	}
	if accounts, _ := b.store.ListAccounts(context.Background()); len(accounts) != 0 {
		t.Fatal("an unauthenticated request created an account")
	}
	if r := b.do(t, "GET", "/v1/accounts", "another-key-abcdefgh", nil); r.status != 200 {
		t.Fatalf("second configured key refused: %d", r.status)
	}
}

func TestAccountLifecycle(t *testing.T) {
	b := newBundle(t)
	r := b.json(t, "POST", "/v1/accounts", validAccount)
	if r.status != 201 {
		t.Fatalf("create = %d %s", r.status, r.body)
	}
	var got map[string]any
	json.Unmarshal(r.body, &got)
	if got["id"] != "acme-1" || got["base_url"] != "https://graph.facebook.com" || got["rate_per_sec"] != 40.0 ||
		got["burst"] != 1.0 || got["state"] != "active" || got["tokens"] != 1.0 {
		t.Fatalf("created account = %s", r.body)
	}
	if _, ok := got["access_token"]; ok {
		t.Fatal("the response carries an access_token field")
	}
	if r.header.Get("Location") != "/v1/accounts/acme-1" {
		t.Fatalf("Location = %q", r.header.Get("Location"))
	}

	if r := b.json(t, "POST", "/v1/accounts", validAccount); r.status != 409 || errorOf(t, r) != "conflict" {
		t.Fatalf("same id again = %d %s, want 409", r.status, r.body)
	}
	samePhone := strings.Replace(validAccount, `"acme-1"`, `"acme-2"`, 1)
	if r := b.json(t, "POST", "/v1/accounts", samePhone); r.status != 409 {
		t.Fatalf("same phone_number_id under another id = %d %s, want 409", r.status, r.body)
	}

	r = b.json(t, "PATCH", "/v1/accounts/acme-1", `{"rate_per_sec":10,"burst":5,"state":"disabled"}`)
	if r.status != 200 {
		t.Fatalf("patch = %d %s", r.status, r.body)
	}
	r = b.json(t, "GET", "/v1/accounts/acme-1", "")
	json.Unmarshal(r.body, &got)
	if got["rate_per_sec"] != 10.0 || got["burst"] != 5.0 || got["state"] != "disabled" {
		t.Fatalf("after patch = %s", r.body)
	}
	qd, _ := got["queue_depth"].(map[string]any)
	if len(qd) != 3 {
		t.Fatalf("queue_depth = %v, want P0, P1, P2", got["queue_depth"])
	}

	r = b.json(t, "GET", "/v1/accounts", "")
	var list struct {
		Accounts []map[string]any `json:"accounts"`
	}
	json.Unmarshal(r.body, &list)
	if r.status != 200 || len(list.Accounts) != 1 || list.Accounts[0]["id"] != "acme-1" {
		t.Fatalf("list = %d %s", r.status, r.body)
	}

	if r := b.json(t, "GET", "/v1/accounts/nope", ""); r.status != 404 || errorOf(t, r) != "not_found" {
		t.Fatalf("unknown account = %d %s", r.status, r.body)
	}
	if r := b.json(t, "PATCH", "/v1/accounts/nope", `{"burst":3}`); r.status != 404 {
		t.Fatalf("patch unknown account = %d %s", r.status, r.body)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	b := newBundle(t)
	if r := b.json(t, "POST", "/v1/accounts", validAccount); r.status != 201 {
		t.Fatalf("seed account: %d %s", r.status, r.body)
	}
	before, _ := b.store.GetAccount(context.Background(), "acme-1")

	cases := []struct {
		name, method, path, body string
		ctype                    string
		status                   int
		code                     string
	}{
		{"malformed json", "POST", "/v1/accounts", `{"id":"x",`, "", 400, "invalid"},
		{"syntax error", "POST", "/v1/accounts", `{"id" "x"}`, "", 400, "invalid"},
		{"not an object", "POST", "/v1/accounts", `[1,2]`, "", 400, "invalid"},
		{"empty body", "POST", "/v1/accounts", ``, "", 400, "invalid"},
		{"trailing data", "POST", "/v1/accounts", validAccount + `{}`, "", 400, "invalid"},
		{"unknown field", "POST", "/v1/accounts", `{"id":"b","phone_number_id":"1","access_token":"t","colour":"red"}`, "", 400, "invalid"},
		{"missing id", "POST", "/v1/accounts", `{"phone_number_id":"1","access_token":"t"}`, "", 400, "invalid"},
		{"missing phone", "POST", "/v1/accounts", `{"id":"b","access_token":"t"}`, "", 400, "invalid"},
		{"missing token", "POST", "/v1/accounts", `{"id":"b","phone_number_id":"1"}`, "", 400, "invalid"},
		{"wrong type", "POST", "/v1/accounts", `{"id":"b","phone_number_id":1,"access_token":"t"}`, "", 400, "invalid"},
		{"phone not digits", "POST", "/v1/accounts", `{"id":"b","phone_number_id":"+1 555","access_token":"t"}`, "", 400, "invalid"},
		{"bad id", "POST", "/v1/accounts", `{"id":"../x","phone_number_id":"1","access_token":"t"}`, "", 400, "invalid"},
		{"zero rate", "POST", "/v1/accounts", `{"id":"b","phone_number_id":"1","access_token":"t","rate_per_sec":0}`, "", 400, "invalid"},
		{"huge rate", "POST", "/v1/accounts", `{"id":"b","phone_number_id":"1","access_token":"t","rate_per_sec":1e9}`, "", 400, "invalid"},
		{"bad base url", "POST", "/v1/accounts", `{"id":"b","phone_number_id":"1","access_token":"t","base_url":"ftp://x"}`, "", 400, "invalid"},
		{"wrong content type", "POST", "/v1/accounts", validAccount, "text/plain", 415, "unsupported"},
		{"patch nothing", "PATCH", "/v1/accounts/acme-1", `{}`, "", 400, "invalid"},
		{"patch bad state", "PATCH", "/v1/accounts/acme-1", `{"state":"paused"}`, "", 400, "invalid"},
		{"patch negative burst", "PATCH", "/v1/accounts/acme-1", `{"burst":-1,"rate_per_sec":5}`, "", 400, "invalid"},
		{"patch unknown field", "PATCH", "/v1/accounts/acme-1", `{"rate_per_sec":5,"rate":6}`, "", 400, "invalid"},
		{"wrong method", "DELETE", "/v1/accounts/acme-1", ``, "", 405, "not_allowed"},
		{"unknown endpoint", "GET", "/v1/nothing-here", ``, "", 404, "not_found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ct := c.ctype
			if ct == "" {
				ct = "application/json"
			}
			r := b.do(t, c.method, c.path, testKey, strings.NewReader(c.body), "Content-Type", ct)
			if r.status != c.status {
				t.Fatalf("status %d %s, want %d", r.status, r.body, c.status)
			}
			if got := errorOf(t, r); got != c.code {
				t.Fatalf("code %q, want %q", got, c.code)
			}
		})
	}
	after, _ := b.store.GetAccount(context.Background(), "acme-1")
	if after.RatePerSec != before.RatePerSec || after.Burst != before.Burst || after.State != before.State || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("bad input changed the account: %+v → %+v", before, after)
	}
	if all, _ := b.store.ListAccounts(context.Background()); len(all) != 1 {
		t.Fatalf("bad input created accounts: %d stored", len(all))
	}
}

func TestOversizedBody(t *testing.T) {
	b := newBundle(t)
	big := `{"id":"big","phone_number_id":"1","access_token":"` + strings.Repeat("a", httpapi.MaxBodyV1) + `"}`
	r := b.json(t, "POST", "/v1/accounts", big)
	if r.status != 413 || errorOf(t, r) != "too_large" {
		t.Fatalf("oversized body = %d %s, want 413", r.status, r.body)
	}
	if _, err := b.store.GetAccount(context.Background(), "big"); err == nil {
		t.Fatal("an oversized request created an account")
	}
}

// TestSecretsNeverLeak drives every account endpoint, the error paths and
// /metrics, then greps all responses and every log line for the access
// token and the API key.
func TestSecretsNeverLeak(t *testing.T) {
	b := newBundle(t)
	var seen bytes.Buffer
	record := func(r response) {
		seen.Write(r.body)
		for k, v := range r.header {
			seen.WriteString(k + ": " + strings.Join(v, ",") + "\n")
		}
	}
	record(b.json(t, "POST", "/v1/accounts", validAccount))
	record(b.json(t, "POST", "/v1/accounts", validAccount)) // conflict
	record(b.json(t, "POST", "/v1/accounts", strings.Replace(validAccount, `"rate_per_sec":40`, `"rate_per_sec":"x"`, 1)))
	record(b.json(t, "POST", "/v1/accounts", strings.Replace(validAccount, `}`, `,"extra":"`+testToken+`"}`, 1)))
	record(b.json(t, "PATCH", "/v1/accounts/acme-1", `{"access_token":"`+testToken+`2"}`))
	record(b.json(t, "PATCH", "/v1/accounts/acme-1", `{"access_token":"`+testToken+` with spaces"}`))
	record(b.json(t, "GET", "/v1/accounts/acme-1", ""))
	record(b.json(t, "GET", "/v1/accounts", ""))
	record(b.do(t, "GET", "/v1/accounts", testKey+"x", nil))
	record(b.do(t, "GET", "/metrics", "", nil))
	a, err := b.store.GetAccount(context.Background(), "acme-1")
	if err != nil || a.AccessToken != testToken+"2" {
		t.Fatalf("token was not stored: %v", err)
	}
	for where, text := range map[string]string{"responses": seen.String(), "logs": b.logs.String()} {
		if strings.Contains(text, testToken) {
			t.Errorf("the access token appears in %s", where)
		}
		if strings.Contains(text, testKey) {
			t.Errorf("the API key appears in %s", where)
		}
	}
	if !strings.Contains(b.logs.String(), "account created") {
		t.Fatal("expected log lines were not captured; the grep above proves nothing")
	}
	if !strings.Contains(seen.String(), "wamux_http_requests_total") {
		t.Fatal("/metrics was not read")
	}
}

// TestStoreFailureIsOpaque: with the store gone, a request gets a 5xx with a
// request id and no SQL or driver text, and the log has the details.
func TestStoreFailureIsOpaque(t *testing.T) {
	b := newBundle(t)
	b.store.Close()
	r := b.json(t, "POST", "/v1/accounts", validAccount)
	if r.status != 500 && r.status != 503 {
		t.Fatalf("status %d %s, want 500 or 503", r.status, r.body)
	}
	code := errorOf(t, r)
	if code != "internal" && code != "unavailable" {
		t.Fatalf("code %q", code)
	}
	low := strings.ToLower(string(r.body))
	for _, leak := range []string{"sql", "insert", "goroutine", ".go:"} {
		if strings.Contains(low, leak) {
			t.Fatalf("error body leaks %q: %s", leak, r.body)
		}
	}
	if !strings.Contains(b.logs.String(), r.header.Get("X-Request-Id")) {
		t.Fatal("the failure was not logged with the request id")
	}
}

func TestRequestIDEchoed(t *testing.T) {
	b := newBundle(t)
	r := b.do(t, "GET", "/healthz", "", nil, "X-Request-Id", "abc-123")
	if r.header.Get("X-Request-Id") != "abc-123" {
		t.Fatalf("X-Request-Id = %q", r.header.Get("X-Request-Id"))
	}
	r = b.do(t, "GET", "/healthz", "", nil, "X-Request-Id", "bad id\twith junk")
	if got := r.header.Get("X-Request-Id"); got == "" || strings.Contains(got, " ") {
		t.Fatalf("unsafe request id not replaced: %q", got)
	}
}
