package httpapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/outbound"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/store"
)

// countingPipelines stand in for the send and receipt pipelines and count
// every call, so a test can prove a refused request reached neither.
type countingPipelines struct{ calls atomic.Int64 }

var errCounted = errors.New("counted call")

func (p *countingPipelines) Submit(context.Context, []wamux.Message) ([]outbound.SubmitResult, error) {
	p.calls.Add(1)
	return nil, errCounted
}
func (p *countingPipelines) Release(context.Context, string) (wamux.Message, error) {
	p.calls.Add(1)
	return wamux.Message{}, errCounted
}
func (p *countingPipelines) Drop(context.Context, string) (wamux.Message, error) {
	p.calls.Add(1)
	return wamux.Message{}, errCounted
}
func (p *countingPipelines) AccountChanged(context.Context, wamux.Account) error {
	p.calls.Add(1)
	return nil
}
func (p *countingPipelines) AccountReactivated(context.Context, wamux.Account) error {
	p.calls.Add(1)
	return nil
}
func (p *countingPipelines) Ingest(context.Context, string, []wamux.Receipt) (receipts.IngestResult, error) {
	p.calls.Add(1)
	return receipts.IngestResult{}, errCounted
}
func (p *countingPipelines) AddInbound(context.Context, []store.InboundMessage) error {
	p.calls.Add(1)
	return errCounted
}
func (p *countingPipelines) MarkRead(context.Context, cloudapi.Destination, string) cloudapi.Result {
	p.calls.Add(1)
	return cloudapi.Result{Outcome: cloudapi.Permanent, Code: -1, Reason: "counted call"}
}
func (p *countingPipelines) DeadLetter(context.Context, string, []store.DeadLetter) error {
	p.calls.Add(1)
	return errCounted
}

// fullServer is the API with every optional part configured, so every
// route is registered: a real store and settings, counting pipelines.
type fullServer struct {
	api   *httpapi.Server
	srv   *httptest.Server
	store store.Store
	set   *settings.Manager
	pipes *countingPipelines
	logs  *syncBuffer
}

func newFullServer(t *testing.T) *fullServer {
	t.Helper()
	ctx := context.Background()
	st, logs, log := openAccountStore(t)
	set, err := settings.Load(ctx, st, log)
	if err != nil {
		t.Fatal(err)
	}
	pipes := &countingPipelines{}
	api, err := httpapi.New(httpapi.Config{Store: st, Registry: prometheus.NewRegistry(), APIKeys: []string{testKey},
		Logger: log, Outbound: pipes, Receipts: pipes, Settings: set, AppSecret: appSecret, VerifyToken: verifyToken,
		ReadMarker: pipes})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &fullServer{api: api, srv: srv, store: st, set: set, pipes: pipes, logs: logs}
}

// The routes the endpoint table of docs/api.md documents: /v1 ones need an API key, the
// others are open (health, metrics, dashboard) or signed (webhook).
var (
	keyedRoutes = []string{
		"POST /v1/accounts", "GET /v1/accounts", "GET /v1/accounts/{id}", "PATCH /v1/accounts/{id}",
		"POST /v1/messages", "POST /v1/messages:batch", "GET /v1/messages/{msg_id}",
		"POST /v1/messages/{msg_id}/release", "POST /v1/messages/{msg_id}/drop",
		"GET /v1/config", "PATCH /v1/config",
		"POST /v1/receipts:batch", "GET /v1/dead-letters", "GET /v1/late-receipts",
		"GET /v1/accounts/{id}/inbound", "POST /v1/accounts/{id}/inbound/{wamid}/read",
		"GET /v1/audit",
	}
	openRoutes = []string{
		"GET /healthz", "GET /readyz", "GET /metrics", "GET /{$}", "GET /ui/state", "GET /ui/{file}",
		"GET /webhook", "POST /webhook",
	}
)

// routePath turns a pattern into a method and a concrete path.
func routePath(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	path = strings.NewReplacer("{$}", "", "{id}", "acc1", "{msg_id}", "m1", "{file}", "app.js", "{wamid}", "wamid.X").Replace(path)
	return method, path
}

// TestRoutesAreTheDocumentedOnes: a route added without deciding whether
// it needs a key (and documenting it) fails here, and so does a documented
// one that is not served.
func TestRoutesAreTheDocumentedOnes(t *testing.T) {
	f := newFullServer(t)
	got := f.api.Patterns()
	want := append(slices.Clone(keyedRoutes), openRoutes...)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("registered routes:\n%v\ndocumented routes:\n%v", got, want)
	}
}

// TestEveryV1RouteRefusesWithoutKey walks every registered /v1 route with
// no key, a wrong one, a near miss and other schemes: each is a 401 in the
// JSON envelope with WWW-Authenticate, and nothing reaches a pipeline, the
// store or the settings.
func TestEveryV1RouteRefusesWithoutKey(t *testing.T) {
	f := newFullServer(t)
	ctx := context.Background()
	before, _ := f.store.GetAccount(ctx, "acc1")
	auths := map[string]string{
		"none":          "",
		"wrong key":     "Bearer wrong-key-0123456789",
		"key prefix":    "Bearer " + testKey[:len(testKey)-1],
		"key and more":  "Bearer " + testKey + "x",
		"basic scheme":  "Basic " + testKey,
		"bare key":      testKey,
		"empty bearer":  "Bearer ",
		"padded bearer": "Bearer  " + testKey,
	}
	body := `{"id":"acc2","phone_number_id":"2","access_token":"t","rate_per_sec":1,"burst":1,"gap_timeout":"1s",` +
		`"bloom":false,"state":"disabled","account_id":"acc1","receipts":[{"message_id":"w","type":"sent","event_time":1}],` +
		`"messages":[{"biz_type":"b","to":"15551234567","type":"text","text":{"body":"hi"}}],"biz_type":"b","to":"15551234567"}`
	n := 0
	for _, pattern := range f.api.Patterns() {
		method, path := routePath(pattern)
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		n++
		for name, auth := range auths {
			req, err := http.NewRequest(method, f.srv.URL+path+"?api_key="+testKey, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(res.Body)
			res.Body.Close()
			r := response{status: res.StatusCode, header: res.Header, body: raw}
			if r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s with %s: %d %s, want 401 with WWW-Authenticate", pattern, name, r.status, r.body)
				continue
			}
			if code := errorOf(t, r); code != "unauthorized" {
				t.Errorf("%s with %s: code %q", pattern, name, code)
			}
		}
	}
	if n != len(keyedRoutes) {
		t.Fatalf("walked %d /v1 routes, want %d", n, len(keyedRoutes))
	}
	if c := f.pipes.calls.Load(); c != 0 {
		t.Errorf("refused requests reached the pipelines %d times", c)
	}
	after, _ := f.store.GetAccount(ctx, "acc1")
	if after.UpdatedAt != before.UpdatedAt || after.State != before.State {
		t.Errorf("refused requests changed the account: %+v → %+v", before, after)
	}
	if all, _ := f.store.ListAccounts(ctx); len(all) != 1 {
		t.Errorf("refused requests created accounts: %d", len(all))
	}
	if c := f.set.Current(); c != settings.Defaults() {
		t.Errorf("refused requests changed the settings: %+v", c)
	}
}

// TestOpenRoutesNeedNoKey: health, metrics and the dashboard answer
// without a key; the webhook's POST is refused without Meta's signature
// (it has no API key) and its GET without the verify token.
func TestOpenRoutesNeedNoKey(t *testing.T) {
	f := newFullServer(t)
	for _, pattern := range openRoutes {
		method, path := routePath(pattern)
		req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(`{"object":"whatsapp_business_account","entry":[]}`))
		req.Header.Set("Authorization", "Bearer "+testKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		r := response{status: res.StatusCode, header: res.Header, body: raw}
		switch pattern {
		case "POST /webhook":
			if r.status != http.StatusUnauthorized || errorOf(t, r) != "unauthorized" {
				t.Errorf("%s with an API key but no signature: %d %s, want 401", pattern, r.status, r.body)
			}
		case "GET /webhook":
			if r.status != http.StatusForbidden || errorOf(t, r) != "forbidden" {
				t.Errorf("%s without the verify token: %d %s, want 403", pattern, r.status, r.body)
			}
		default:
			if r.status != http.StatusOK {
				t.Errorf("%s without a key: %d %.200s, want 200", pattern, r.status, r.body)
			}
		}
	}
	if c := f.pipes.calls.Load(); c != 0 {
		t.Errorf("unsigned webhooks reached the receipt pipeline %d times", c)
	}
}

// endlessJSON is a request body that never ends: an object whose string
// value goes on for ever. It counts what the server read of it.
type endlessJSON struct {
	read  int64
	start bool
}

func (e *endlessJSON) Read(p []byte) (int, error) {
	n := 0
	if !e.start {
		e.start = true
		n = copy(p, `{"id":"`)
	}
	for ; n < len(p); n++ {
		p[n] = 'a'
	}
	e.read += int64(n)
	return n, nil
}

// TestEveryRouteBoundsItsBody sends every route an endless body: routes
// that read a body answer 413 after at most their limit, and none reads
// more than that (so a huge body is never held in memory whole).
func TestEveryRouteBoundsItsBody(t *testing.T) {
	f := newFullServer(t)
	limits := map[string]int64{
		"POST /v1/messages:batch": httpapi.MaxBodyBatch, "POST /v1/receipts:batch": httpapi.MaxBodyBatch,
		"POST /webhook": httpapi.MaxBodyWebhook,
	}
	for _, pattern := range f.api.Patterns() {
		method, path := routePath(pattern)
		limit, ok := limits[pattern]
		if !ok {
			limit = httpapi.MaxBodyV1
		}
		body := &endlessJSON{}
		req := httptest.NewRequest(method, path, body)
		req.ContentLength = -1
		req.Header.Set("Authorization", "Bearer "+testKey)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		calls := f.pipes.calls.Load()
		f.api.ServeHTTP(rec, req)
		if body.read > limit+64<<10 {
			t.Errorf("%s read %d bytes of an endless body; its limit is %d", pattern, body.read, limit)
		}
		if (method == http.MethodPost || method == http.MethodPatch) && body.read > 0 && rec.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("%s read the endless body and answered %d %.200s, want 413", pattern, rec.Code, rec.Body)
		}
		if body.read > 0 && f.pipes.calls.Load() != calls {
			t.Errorf("%s passed an oversized body on to a pipeline", pattern)
		}
	}
}

// TestNoRouteLeaksSecrets sends every registered route the secrets where
// a careless client or attacker would put them (the key, the access token,
// the app secret and the verify token in headers, the query, and as values
// in valid or invalid bodies), with and without the key, then greps every
// response, /metrics, /ui/state and every log line for them. (An error
// may name what the client itself wrote where a name or enum belongs: an
// unknown field, a receipt type; no secret has such a place.)
func TestNoRouteLeaksSecrets(t *testing.T) {
	f := newFullServer(t)
	secrets := []string{testKey, testToken, appSecret, verifyToken}
	bodies := []string{
		`{"id":"acc2","phone_number_id":"2","access_token":"` + testToken + `"}`,
		`{"access_token":"` + testToken + `","state":"` + testToken + `"}`,
		`{"access_token":"` + testToken + ` x"}`,
		`{"access_token":` + `["` + testToken + `"]}`,
		`{"colour":"` + verifyToken + `"}`,
		`{"biz_type":"b","to":"15551234567","type":"text","text":{"body":"` + testToken + `"}}`,
		`{"messages":[{"access_token":"` + testToken + `"}]}`,
		`{"account_id":"acc1","receipts":[{"message_id":"` + appSecret + `","type":"sent","event_time":"` + appSecret + `"}]}`,
		`{"gap_timeout":"` + appSecret + `","bloom":"` + testToken + `"}`,
		`{"object":"whatsapp_business_account","entry":[]}` + testToken,
	}
	var seen strings.Builder
	send := func(method, path, auth, body string, hdr ...string) {
		req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		seen.Write(raw)
		for k, v := range res.Header {
			seen.WriteString(k + ": " + strings.Join(v, ",") + "\n")
		}
	}
	query := "?access_token=" + testToken + "&hub.verify_token=" + verifyToken + "&hub.mode=subscribe&hub.challenge=c&limit=" + testKey
	for _, pattern := range f.api.Patterns() {
		method, path := routePath(pattern)
		for _, body := range bodies {
			send(method, path, "Bearer "+testKey, body, "X-Hub-Signature-256", "sha256="+appSecret, "X-Api-Key", testKey)
			send(method, path+query, "Bearer "+testKey+"x", body, "Cookie", "k="+testKey)
		}
		send(method, path+query, "", "")
	}
	send("GET", "/webhook?hub.mode=subscribe&hub.verify_token="+verifyToken+"&hub.challenge=ok", "", "")
	send("GET", "/metrics", "", "")
	send("GET", "/ui/state", "", "")
	send("GET", "/v1/accounts", "Bearer "+testKey, "")
	logs := f.logs.String()
	if !strings.Contains(logs, "http request") || !strings.Contains(logs, "failed") {
		t.Fatalf("the logs lack the expected lines, so the grep proves nothing:\n%.2000s", logs)
	}
	if !strings.Contains(seen.String(), "wamux_http_requests_total") || !strings.Contains(seen.String(), `"accounts"`) {
		t.Fatal("/metrics or /ui/state was not read")
	}
	for _, secret := range secrets {
		if strings.Contains(logs, secret) {
			t.Errorf("secret %q is in the logs", secret)
		}
		if strings.Contains(seen.String(), secret) {
			i := strings.Index(seen.String(), secret)
			t.Errorf("secret %q is in a response: %.300s", secret, seen.String()[max(0, i-200):])
		}
	}
}

// TestV1RoutesRefuseUnknownQuery: as with unknown body fields, a query
// parameter a route does not take is a 400 that changes nothing: ignoring
// ?dry_run=true would send for real, ignoring ?limit= on the accounts
// list would return everything.
func TestV1RoutesRefuseUnknownQuery(t *testing.T) {
	f := newFullServer(t)
	ctx := context.Background()
	before, _ := f.store.GetAccount(ctx, "acc1")
	body := `{"biz_type":"b","to":"15551234567","type":"text","text":{"body":"hi"}}`
	bodies := map[string]string{
		"POST /v1/accounts":         `{"id":"acc2","phone_number_id":"2","access_token":"t"}`,
		"PATCH /v1/accounts/{id}":   `{"state":"disabled"}`,
		"POST /v1/messages:batch":   `{"messages":[` + body + `]}`,
		"PATCH /v1/config":          `{"bloom":false}`,
		"POST /v1/receipts:batch":   `{"account_id":"acc1","receipts":[{"message_id":"w","type":"sent","event_time":1}]}`,
		"POST /v1/messages":         body,
		"GET /v1/dead-letters":      "",
		"GET /v1/late-receipts":     "",
		"GET /v1/accounts":          "",
		"GET /v1/accounts/{id}":     "",
		"GET /v1/config":            "",
		"GET /v1/messages/{msg_id}": "",
	}
	n := 0
	for _, pattern := range f.api.Patterns() {
		method, path := routePath(pattern)
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		n++
		for _, q := range []string{"?dry_run=true", "?limit=1&after=x", "?%zz"} {
			r := f.do(t, method, path+q, "application/json", bodies[pattern])
			if r.status != http.StatusBadRequest {
				t.Errorf("%s%s: %d %.200s, want 400", pattern, q, r.status, r.body)
				continue
			}
			errorOf(t, r)
		}
	}
	if n != len(keyedRoutes) {
		t.Fatalf("walked %d /v1 routes, want %d", n, len(keyedRoutes))
	}
	if c := f.pipes.calls.Load(); c != 0 {
		t.Errorf("requests with unknown query parameters reached the pipelines %d times", c)
	}
	after, _ := f.store.GetAccount(ctx, "acc1")
	if after.State != before.State || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("refused requests changed the account")
	}
	if all, _ := f.store.ListAccounts(ctx); len(all) != 1 {
		t.Errorf("refused requests created accounts: %d", len(all))
	}
	if c := f.set.Current(); c != settings.Defaults() {
		t.Errorf("refused requests changed the settings: %+v", c)
	}
}
