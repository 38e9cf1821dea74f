package httpapi_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/events"
	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/internal/netguard"
	"github.com/wamux/wamux/internal/seal"
	"github.com/wamux/wamux/outbound"
	"github.com/wamux/wamux/settings"
)

// Keys with scopes, as WAMUX_API_KEYS=…,send-key-…:send,… gives them.
const (
	allKey   = "all-scopes-key-0001"
	sendKey  = "send-only-key-0002"
	readKey  = "read-only-key-0003"
	adminKey = "admin-only-key-0004"
	rsKey    = "read-send-key-0005"
	raKey    = "read-admin-key-0006"
	saKey    = "send-admin-key-0007"
)

var scopedKeys = []string{allKey, sendKey + ":send", readKey + ":read", adminKey + ":admin",
	rsKey + ":read+send", raKey + ":read+admin", saKey + ":send+admin"}

// routeScopes is the table of docs/api.md: what a key needs per route.
var routeScopes = map[string]string{
	"POST /v1/messages":                           "send",
	"POST /v1/messages:batch":                     "send",
	"POST /v1/receipts:batch":                     "send",
	"GET /v1/accounts":                            "read",
	"GET /v1/accounts/{id}":                       "read",
	"GET /v1/messages/{msg_id}":                   "read",
	"GET /v1/config":                              "read",
	"GET /v1/dead-letters":                        "read",
	"GET /v1/late-receipts":                       "read",
	"GET /v1/accounts/{id}/inbound":               "read",
	"GET /v1/subscriptions":                       "read",
	"GET /v1/subscriptions/{id}":                  "read",
	"GET /v1/subscriptions/{id}/deliveries":       "read",
	"GET /v1/events":                              "read",
	"POST /v1/accounts":                           "admin",
	"PATCH /v1/accounts/{id}":                     "admin",
	"POST /v1/messages/{msg_id}/release":          "admin",
	"POST /v1/messages/{msg_id}/drop":             "admin",
	"PATCH /v1/config":                            "admin",
	"POST /v1/accounts/{id}/inbound/{wamid}/read": "admin",
	"POST /v1/subscriptions":                      "admin",
	"PATCH /v1/subscriptions/{id}":                "admin",
	"DELETE /v1/subscriptions/{id}":               "admin",
	"POST /v1/subscriptions/{id}/secret:rotate":   "admin",
	"POST /v1/subscriptions/{id}/replay":          "admin",
	"GET /v1/audit":                               "admin",
}

// lacking is, per scope, a key holding both other scopes but not it.
var lacking = map[string]string{"send": raKey, "read": saKey, "admin": rsKey}

// only is, per scope, a key holding that scope alone.
var only = map[string]string{"send": sendKey, "read": readKey, "admin": adminKey}

// acceptingPipelines accept every submitted message as queued.
type acceptingPipelines struct{ countingPipelines }

func (p *acceptingPipelines) Submit(_ context.Context, msgs []wamux.Message) ([]outbound.SubmitResult, error) {
	p.calls.Add(1)
	out := make([]outbound.SubmitResult, len(msgs))
	for i, m := range msgs {
		m.Status = wamux.StatusQueued
		out[i] = outbound.SubmitResult{Message: m}
	}
	return out, nil
}

// newScopedServer serves every route (the event pipeline too) to the
// scoped keys.
func newScopedServer(t *testing.T) *fullServer {
	t.Helper()
	ctx := context.Background()
	st, logs, log := openAccountStore(t)
	set, err := settings.Load(ctx, st, log)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := seal.New(sealKey)
	if err != nil {
		t.Fatal(err)
	}
	m, err := events.New(events.Config{Store: st, Sealer: keys, Registry: prometheus.NewRegistry(), Logger: log,
		Guard: &netguard.Guard{}, Poll: 5 * time.Millisecond, IdlePoll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	pipes := &acceptingPipelines{}
	api, err := httpapi.New(httpapi.Config{Store: st, Registry: prometheus.NewRegistry(), APIKeys: scopedKeys,
		Logger: log, Outbound: pipes, Receipts: pipes, Settings: set, AppSecret: appSecret, VerifyToken: verifyToken,
		ReadMarker: pipes, Events: m})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &fullServer{api: api, srv: srv, store: st, set: set, pipes: &pipes.countingPipelines, logs: logs}
}

func (f *fullServer) as(t *testing.T, key, method, path, body string) response {
	t.Helper()
	b := &bundle{srv: f.srv}
	return b.do(t, method, path, key, strings.NewReader(body), "Content-Type", "application/json")
}

// TestEveryV1RouteDeclaresItsScope walks every registered route: each /v1
// one has the scope of the documented table (a route added without
// deciding it fails here), and no other route has one.
func TestEveryV1RouteDeclaresItsScope(t *testing.T) {
	f := newScopedServer(t)
	declared := f.api.RouteScopes()
	for _, pattern := range f.api.Patterns() {
		_, path := routePath(pattern)
		got, has := declared[pattern]
		want, documented := routeScopes[pattern]
		switch {
		case !strings.HasPrefix(path, "/v1/"):
			if has {
				t.Errorf("%s is not under /v1 but declares scope %s", pattern, got)
			}
		case !has:
			t.Errorf("%s declares no scope", pattern)
		case !documented:
			t.Errorf("%s needs %s, and the table of docs/api.md (routeScopes) lacks it", pattern, got)
		case got != want:
			t.Errorf("%s needs %s, the documented table says %s", pattern, got, want)
		}
	}
	if len(declared) != len(routeScopes) {
		t.Errorf("%d routes declare scopes, the table has %d:\n%v\n%v", len(declared), len(routeScopes),
			slices.Sorted(maps.Keys(declared)), slices.Sorted(maps.Keys(routeScopes)))
	}
}

// TestEveryV1RouteChecksItsScope calls every /v1 route with a key that
// holds both other scopes but not the route's: 403 forbidden naming the
// scope, nothing reaches a pipeline, the store or the settings. With the
// route's scope alone, or with no scopes given (all three), the same
// request is not refused for its key.
func TestEveryV1RouteChecksItsScope(t *testing.T) {
	f := newScopedServer(t)
	ctx := context.Background()
	before, _ := f.store.GetAccount(ctx, "acc1")
	body := `{"id":"acc2","phone_number_id":"2","access_token":"t","rate_per_sec":1,"burst":1,"gap_timeout":"1s",` +
		`"bloom":false,"state":"disabled","account_id":"acc1","receipts":[{"message_id":"w","type":"sent","event_time":1}],` +
		`"messages":[{"biz_type":"b","to":"15551234567","type":"text","text":{"body":"hi"}}],"biz_type":"b","to":"15551234567"}`
	n := 0
	for _, pattern := range f.api.Patterns() {
		method, path := routePath(pattern)
		need, ok := routeScopes[pattern]
		if !ok {
			continue
		}
		n++
		r := f.as(t, lacking[need], method, path, body)
		if r.status != http.StatusForbidden || errorOf(t, r) != "forbidden" {
			t.Errorf("%s with a key lacking %s: %d %.200s, want 403 forbidden", pattern, need, r.status, r.body)
			continue
		}
		if msg := errorMessage(t, r); !strings.Contains(msg, "the "+need+" scope") {
			t.Errorf("%s: 403 message %q does not name the %s scope", pattern, msg, need)
		}
	}
	if n != len(routeScopes) {
		t.Fatalf("walked %d routes, want %d", n, len(routeScopes))
	}
	if c := f.pipes.calls.Load(); c != 0 {
		t.Errorf("refused requests reached the pipelines %d times", c)
	}
	after, _ := f.store.GetAccount(ctx, "acc1")
	if !after.UpdatedAt.Equal(before.UpdatedAt) || after.State != before.State {
		t.Errorf("refused requests changed the account")
	}
	if c := f.set.Current(); c != settings.Defaults() {
		t.Errorf("refused requests changed the settings: %+v", c)
	}
	for _, pattern := range f.api.Patterns() {
		method, path := routePath(pattern)
		need, ok := routeScopes[pattern]
		if !ok {
			continue
		}
		for _, key := range []string{only[need], allKey} {
			r := f.as(t, key, method, path, body)
			if r.status == http.StatusForbidden || r.status == http.StatusUnauthorized {
				t.Errorf("%s with a key holding %s: %d %.200s", pattern, need, r.status, r.body)
			}
		}
	}
}

// TestSendOnlyKey: the key an application sends with cannot reconfigure
// an account (where it could point the account's token at its own host)
// nor read accounts, and it sends.
func TestSendOnlyKey(t *testing.T) {
	f := newScopedServer(t)
	r := f.as(t, sendKey, "PATCH", "/v1/accounts/acc1", `{"base_url":"http://127.0.0.1:9"}`)
	if r.status != http.StatusForbidden || errorOf(t, r) != "forbidden" || !strings.Contains(errorMessage(t, r), "admin") {
		t.Errorf("PATCH: %d %s, want 403 naming admin", r.status, r.body)
	}
	if a, _ := f.store.GetAccount(context.Background(), "acc1"); a.BaseURL != wamux.DefaultBaseURL {
		t.Errorf("base_url changed to %s", a.BaseURL)
	}
	r = f.as(t, sendKey, "GET", "/v1/accounts", "")
	if r.status != http.StatusForbidden || !strings.Contains(errorMessage(t, r), "read") {
		t.Errorf("GET /v1/accounts: %d %s, want 403 naming read", r.status, r.body)
	}
	r = f.as(t, sendKey, "POST", "/v1/messages", `{"msg_id":"m1","biz_type":"b","account_id":"acc1","to":"15551234567","type":"text","text":{"body":"hi"}}`)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST /v1/messages: %d %s, want 202", r.status, r.body)
	}
	var got struct {
		MsgID  string `json:"msg_id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil || got.MsgID != "m1" || got.Status != "queued" {
		t.Errorf("POST /v1/messages answered %s", r.body)
	}
	if !strings.Contains(f.logs.String(), `"scope_needed":"admin"`) {
		t.Error("the refusal is not logged with the scope it needed")
	}
	if strings.Contains(f.logs.String(), sendKey) || strings.Contains(string(r.body), sendKey) {
		t.Error("the key's text reached the logs or a response")
	}
}

// TestReadOnlyKey reads but neither sends nor changes anything; a key
// without scopes does all three.
func TestReadOnlyKey(t *testing.T) {
	f := newScopedServer(t)
	msg := `{"msg_id":"m1","biz_type":"b","account_id":"acc1","to":"15551234567","type":"text","text":{"body":"hi"}}`
	for _, c := range []struct {
		key, method, path, body string
		want                    int
	}{
		{readKey, "GET", "/v1/accounts", "", http.StatusOK},
		{readKey, "GET", "/v1/accounts/acc1", "", http.StatusOK},
		{readKey, "GET", "/v1/config", "", http.StatusOK},
		{readKey, "POST", "/v1/messages", msg, http.StatusForbidden},
		{readKey, "POST", "/v1/messages:batch", `{"messages":[` + msg + `]}`, http.StatusForbidden},
		{readKey, "POST", "/v1/receipts:batch", `{"account_id":"acc1","receipts":[{"message_id":"w","type":"sent","event_time":1}]}`, http.StatusForbidden},
		{readKey, "PATCH", "/v1/config", `{"bloom":false}`, http.StatusForbidden},
		{allKey, "GET", "/v1/accounts", "", http.StatusOK},
		{allKey, "POST", "/v1/messages", msg, http.StatusAccepted},
		{allKey, "PATCH", "/v1/accounts/acc1", `{"rate_per_sec":5}`, http.StatusOK},
		{allKey, "PATCH", "/v1/config", `{"bloom":false}`, http.StatusOK},
	} {
		r := f.as(t, c.key, c.method, c.path, c.body)
		if r.status != c.want {
			t.Errorf("%s %s with %s: %d %.200s, want %d", c.method, c.path, c.key[:8], r.status, r.body, c.want)
		}
	}
}
