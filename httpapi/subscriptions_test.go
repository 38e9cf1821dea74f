package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/events"
	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/internal/netguard"
	"github.com/wamux/wamux/internal/seal"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/sqlite"
	"github.com/wamux/wamux/webhooksig"
)

// sealKey is the fixed key the tests seal subscription secrets with.
var sealKey = bytes.Repeat([]byte{0x5a}, seal.KeySize)

// loopback lets subscriptions point at httptest receivers.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// feedMark tags the context of a feed read that the test follows.
type feedMark struct{}

// watchedStore reports, on the channel in a context tagged with feedMark,
// every read of the feed that found nothing.
type watchedStore struct {
	store.Store
}

func (w watchedStore) ListEvents(ctx context.Context, after string, limit int) ([]wamux.Event, string, error) {
	es, next, err := w.Store.ListEvents(ctx, after, limit)
	if ch, ok := ctx.Value(feedMark{}).(chan struct{}); ok && err == nil && len(es) == 0 {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	return es, next, err
}

// markedFeed tags every feed read of the API with emptyReads.
type markedFeed struct {
	*events.Manager
	emptyReads chan struct{}
}

func (f markedFeed) Feed(ctx context.Context, after string, limit int, wait time.Duration) ([]wamux.Event, string, error) {
	return f.Manager.Feed(context.WithValue(ctx, feedMark{}, f.emptyReads), after, limit, wait)
}

type eventsBundle struct {
	*bundle
	m *events.Manager
	// emptyReads gets a value each time a /v1/events request read the
	// feed and found nothing.
	emptyReads chan struct{}
}

// newEventsBundle serves the API with an event manager on a real SQLite
// store, its secrets sealed under sealKey and destinations checked by g.
func newEventsBundle(t *testing.T, g *netguard.Guard) *eventsBundle {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "wamux.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	keys, err := seal.New(sealKey)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m, err := events.New(events.Config{Store: watchedStore{st}, Sealer: keys, Registry: prometheus.NewRegistry(),
		Logger: logger, Guard: g, Poll: 5 * time.Millisecond, IdlePoll: 20 * time.Millisecond,
		BackoffBase: 5 * time.Millisecond, BackoffCap: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	feed := markedFeed{Manager: m, emptyReads: make(chan struct{}, 1)}
	api, err := httpapi.New(httpapi.Config{Store: st, Logger: logger, Registry: prometheus.NewRegistry(),
		APIKeys: []string{testKey}, Events: feed})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &eventsBundle{bundle: &bundle{srv: srv, store: st, logs: logs}, m: m, emptyReads: feed.emptyReads}
}

// hook is a receiver of deliveries.
type hook struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []hookDelivery
	notify chan struct{}
}

type hookDelivery struct {
	header http.Header
	body   []byte
	status string // data.status of the event
}

func newHook(t *testing.T) *hook {
	t.Helper()
	h := &hook{notify: make(chan struct{}, 1)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var env struct {
			Data struct {
				Status string `json:"status"`
			} `json:"data"`
		}
		json.Unmarshal(body, &env)
		h.mu.Lock()
		h.got = append(h.got, hookDelivery{header: r.Header.Clone(), body: body, status: env.Data.Status})
		h.mu.Unlock()
		select {
		case h.notify <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) deliveries() []hookDelivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookDelivery(nil), h.got...)
}

// waitN waits until the hook has had at least n requests and returns them.
func (h *hook) waitN(t *testing.T, n int) []hookDelivery {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		if ds := h.deliveries(); len(ds) >= n {
			return ds
		}
		select {
		case <-h.notify:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %d deliveries; got %d", n, len(h.deliveries()))
		}
	}
}

// created is the body of a create or rotate answer.
type created struct {
	ID                 string     `json:"id"`
	Secret             string     `json:"secret"`
	State              string     `json:"state"`
	PreviousSecretEnds *time.Time `json:"previous_secret_valid_until"`
}

func (b *eventsBundle) subscribe(t *testing.T, body string) created {
	t.Helper()
	r := b.json(t, "POST", "/v1/subscriptions", body)
	if r.status != http.StatusCreated {
		t.Fatalf("create subscription = %d %s", r.status, r.body)
	}
	var c created
	if err := json.Unmarshal(r.body, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// addMessage stores a queued message of account acme-1.
func addMessage(t *testing.T, st store.Store, id string) {
	t.Helper()
	_, err := st.InsertMessages(context.Background(), []wamux.Message{{ID: id, BizType: "otp", AccountID: "acme-1",
		To: "15550001", Type: "text", Payload: []byte(`{"body":"x"}`), ContentHash: "h" + id, Status: wamux.StatusSending}})
	if err != nil {
		t.Fatal(err)
	}
}

// setStatus changes a message's status; each change is one event.
func setStatus(t *testing.T, st store.Store, id string, s wamux.Status) {
	t.Helper()
	u := store.MessageUpdate{MsgID: id, Status: s}
	if s == wamux.StatusAccepted {
		u.WAMID = "wamid." + id
	}
	if _, err := st.UpdateMessage(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

// errorMessage checks the error envelope and returns its message.
func errorMessage(t *testing.T, r response) string {
	t.Helper()
	errorOf(t, r)
	var env struct {
		Error struct{ Message string } `json:"error"`
	}
	json.Unmarshal(r.body, &env)
	return env.Error.Message
}

func TestSubscriptionSecretShownOnlyOnCreate(t *testing.T) {
	b := newEventsBundle(t, &netguard.Guard{Allow: loopback})
	h := newHook(t)
	c := b.subscribe(t, `{"url":"`+h.srv.URL+`/in","events":["message.status"],"description":"orders"}`)
	if !strings.HasPrefix(c.ID, "sub_") || !strings.HasPrefix(c.Secret, "whsec_") || c.State != "active" {
		t.Fatalf("created = %+v", c)
	}
	if _, err := webhooksig.ParseSecret(c.Secret); err != nil {
		t.Fatalf("secret %q does not parse: %v", c.Secret, err)
	}

	stored, err := b.store.GetSubscription(context.Background(), c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stored.Secret, "sealed:v1:") || strings.Contains(stored.Secret, strings.TrimPrefix(c.Secret, "whsec_")) {
		t.Fatalf("stored secret %q is not sealed", stored.Secret)
	}
	keys, _ := seal.New(sealKey)
	if plain, err := keys.Open(stored.Secret); err != nil || plain != c.Secret {
		t.Fatalf("stored secret opens to %q (%v), want the one created", plain, err)
	}

	// An event, so that the deliveries view has an attempt to show.
	addMessage(t, b.store, "m1")
	setStatus(t, b.store, "m1", wamux.StatusAccepted)
	h.waitN(t, 1)
	testwait.For(t, "the attempt listed", 10*time.Second, func() bool {
		r := b.json(t, "GET", "/v1/subscriptions/"+c.ID+"/deliveries", "")
		return strings.Contains(string(r.body), `"status_code":204`)
	})

	bare := strings.TrimPrefix(c.Secret, "whsec_")
	for _, req := range []struct{ method, path, body string }{
		{"GET", "/v1/subscriptions/" + c.ID, ""},
		{"GET", "/v1/subscriptions", ""},
		{"PATCH", "/v1/subscriptions/" + c.ID, `{"description":"orders and refunds"}`},
		{"GET", "/v1/subscriptions/" + c.ID + "/deliveries", ""},
	} {
		r := b.json(t, req.method, req.path, req.body)
		if r.status != http.StatusOK {
			t.Fatalf("%s %s = %d %s", req.method, req.path, r.status, r.body)
		}
		if strings.Contains(string(r.body), bare) || strings.Contains(string(r.body), `"secret"`) {
			t.Fatalf("%s %s shows the secret: %s", req.method, req.path, r.body)
		}
		if !strings.Contains(string(r.body), c.ID) {
			t.Fatalf("%s %s does not show the subscription: %s", req.method, req.path, r.body)
		}
	}
	if strings.Contains(b.logs.String(), bare) {
		t.Fatal("the secret is in the logs")
	}
}

func TestSubscriptionCreateValidation(t *testing.T) {
	resolve := func(_ context.Context, host string) ([]net.IPAddr, error) {
		switch host {
		case "internal.example":
			return []net.IPAddr{{IP: net.ParseIP("10.1.2.3")}}, nil
		case "public.example":
			return []net.IPAddr{{IP: net.ParseIP("93.184.216.34")}}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	b := newEventsBundle(t, &netguard.Guard{LookupIPAddr: resolve})
	if r := b.json(t, "POST", "/v1/accounts", validAccount); r.status != http.StatusCreated {
		t.Fatalf("create account = %d %s", r.status, r.body)
	}
	long := strings.Repeat("d", events.MaxDescription+1)
	for _, tc := range []struct{ name, body, want string }{
		{"empty", `{}`, "required"},
		{"no url", `{"events":["message.status"]}`, "required"},
		{"no events", `{"url":"https://public.example/h"}`, "required"},
		{"empty events", `{"url":"https://public.example/h","events":[]}`, "at least one"},
		{"unknown event", `{"url":"https://public.example/h","events":["message.bogus"]}`, "message.bogus"},
		{"unknown account", `{"url":"https://public.example/h","events":["*"],"account_ids":["nobody-1"]}`, "nobody-1"},
		{"bad account id", `{"url":"https://public.example/h","events":["*"],"account_ids":["no spaces"]}`, "not an account id"},
		{"state", `{"url":"https://public.example/h","events":["*"],"state":"active"}`, "state"},
		{"private http", `{"url":"http://10.0.0.1/h","events":["*"]}`, "private"},
		{"metadata", `{"url":"http://169.254.169.254/latest","events":["*"]}`, "link-local"},
		{"loopback https", `{"url":"https://127.0.0.1/h","events":["*"]}`, "loopback"},
		{"public http", `{"url":"http://public.example/h","events":["*"]}`, "plain http"},
		{"name to private", `{"url":"https://internal.example/h","events":["*"]}`, "10.1.2.3"},
		{"no such name", `{"url":"https://nowhere.example/h","events":["*"]}`, "does not resolve"},
		{"scheme", `{"url":"ftp://public.example/h","events":["*"]}`, "scheme"},
		{"credentials", `{"url":"https://u:p@public.example/h","events":["*"]}`, "credentials"},
		{"description", `{"url":"https://public.example/h","events":["*"],"description":"` + long + `"}`, "description"},
		{"unknown field", `{"url":"https://public.example/h","events":["*"],"secret":"whsec_x"}`, "secret"},
		{"not an object", `["https://public.example/h"]`, ""},
	} {
		r := b.json(t, "POST", "/v1/subscriptions", tc.body)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", tc.name, r.status, r.body)
			continue
		}
		if msg := errorMessage(t, r); !strings.Contains(msg, tc.want) {
			t.Errorf("%s: error %q does not name %q", tc.name, msg, tc.want)
		}
	}
	if subs, err := b.store.ListSubscriptions(context.Background()); err != nil || len(subs) != 0 {
		t.Fatalf("refused creates stored %d subscriptions (%v)", len(subs), err)
	}
	// The same guard accepts a public https destination and a known
	// account: the refusals above are the rule, not a broken setup.
	c := b.subscribe(t, `{"url":"https://public.example/h","events":["message.status","account.state"],"account_ids":["acme-1"]}`)
	r := b.json(t, "GET", "/v1/subscriptions/"+c.ID, "")
	var got struct {
		Events     []string `json:"events"`
		AccountIDs []string `json:"account_ids"`
		Pending    *int     `json:"pending"`
	}
	json.Unmarshal(r.body, &got)
	if fmt.Sprint(got.Events) != "[message.status account.state]" || fmt.Sprint(got.AccountIDs) != "[acme-1]" ||
		got.Pending == nil || *got.Pending != 0 {
		t.Fatalf("GET = %s", r.body)
	}
}

func TestSubscriptionPatchDeleteAndUnknownIDs(t *testing.T) {
	b := newEventsBundle(t, &netguard.Guard{Allow: loopback})
	h := newHook(t)
	c := b.subscribe(t, `{"url":"`+h.srv.URL+`/in","events":["*"]}`)
	path := "/v1/subscriptions/" + c.ID

	state := func() string {
		s, err := b.store.GetSubscription(context.Background(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return string(s.State)
	}
	for _, st := range []string{"disabled", "active"} {
		r := b.json(t, "PATCH", path, `{"state":"`+st+`"}`)
		if r.status != http.StatusOK || !strings.Contains(string(r.body), `"state":"`+st+`"`) || state() != st {
			t.Fatalf("PATCH state %s = %d %s (stored %s)", st, r.status, r.body, state())
		}
	}
	for _, body := range []string{`{"state":"failing"}`, `{"state":"paused"}`, `{}`, `{"secret":"whsec_x"}`,
		`{"url":"ftp://127.0.0.1/h"}`, `{"events":["nope"]}`} {
		if r := b.json(t, "PATCH", path, body); r.status != http.StatusBadRequest {
			t.Fatalf("PATCH %s = %d %s, want 400", body, r.status, r.body)
		} else {
			errorOf(t, r)
		}
	}
	if state() != "active" {
		t.Fatalf("refused patches left the state %s", state())
	}
	// A disabled subscription is sent nothing.
	if r := b.json(t, "PATCH", path, `{"state":"disabled"}`); r.status != http.StatusOK {
		t.Fatalf("disable = %d %s", r.status, r.body)
	}
	addMessage(t, b.store, "m1")
	setStatus(t, b.store, "m1", wamux.StatusAccepted)
	other := newHook(t)
	b.subscribe(t, `{"url":"`+other.srv.URL+`/in","events":["*"]}`)
	setStatus(t, b.store, "m1", wamux.StatusSent)
	other.waitN(t, 1)
	if r := b.json(t, "PATCH", path, `{"state":"active"}`); r.status != http.StatusOK {
		t.Fatalf("enable = %d %s", r.status, r.body)
	}
	// Made active again, it gets what was written while it was disabled.
	if ds := h.waitN(t, 2); ds[0].status != "accepted" || ds[1].status != "sent" {
		t.Fatalf("after enabling: %s, %s", ds[0].status, ds[1].status)
	}

	if r := b.json(t, "DELETE", path, ""); r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("DELETE = %d %s", r.status, r.body)
	}
	if _, err := b.store.GetSubscription(context.Background(), c.ID); wamux.ErrorCode(err) != wamux.ENotFound {
		t.Fatalf("deleted subscription still stored (%v)", err)
	}
	for _, id := range []string{c.ID, "sub_00000000000000000000"} {
		for _, req := range []struct{ method, path, body string }{
			{"GET", "/v1/subscriptions/" + id, ""},
			{"PATCH", "/v1/subscriptions/" + id, `{"state":"active"}`},
			{"DELETE", "/v1/subscriptions/" + id, ""},
			{"POST", "/v1/subscriptions/" + id + "/secret:rotate", ""},
			{"POST", "/v1/subscriptions/" + id + "/replay", `{"since":"2026-01-01T00:00:00Z"}`},
			{"GET", "/v1/subscriptions/" + id + "/deliveries", ""},
		} {
			r := b.json(t, req.method, req.path, req.body)
			if r.status != http.StatusNotFound || errorOf(t, r) != "not_found" {
				t.Errorf("%s %s = %d %s, want 404", req.method, req.path, r.status, r.body)
			}
		}
	}
	if subs, _ := b.store.ListSubscriptions(context.Background()); len(subs) != 1 {
		t.Fatalf("%d subscriptions stored, want the other one only", len(subs))
	}
}

func TestSubscriptionRotateSignsWithBothSecrets(t *testing.T) {
	b := newEventsBundle(t, &netguard.Guard{Allow: loopback})
	h := newHook(t)
	c := b.subscribe(t, `{"url":"`+h.srv.URL+`/in","events":["message.status"]}`)
	addMessage(t, b.store, "m1")
	setStatus(t, b.store, "m1", wamux.StatusAccepted)
	first := h.waitN(t, 1)[0]
	oldOnly, err := webhooksig.NewVerifier(c.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := oldOnly.Verify(first.header, first.body); err != nil {
		t.Fatalf("delivery before the rotation: %v", err)
	}
	if n := len(strings.Fields(first.header.Get("webhook-signature"))); n != 1 {
		t.Fatalf("%d signatures before the rotation, want 1", n)
	}

	r := b.json(t, "POST", "/v1/subscriptions/"+c.ID+"/secret:rotate", "")
	if r.status != http.StatusOK {
		t.Fatalf("rotate = %d %s", r.status, r.body)
	}
	var rot created
	json.Unmarshal(r.body, &rot)
	if !strings.HasPrefix(rot.Secret, "whsec_") || rot.Secret == c.Secret || rot.PreviousSecretEnds == nil ||
		time.Until(*rot.PreviousSecretEnds) < events.RotationOverlap-time.Minute {
		t.Fatalf("rotate answered %s", r.body)
	}
	newOnly, err := webhooksig.NewVerifier(rot.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := newOnly.Verify(first.header, first.body); err == nil {
		t.Fatal("the new secret verifies a delivery signed before it existed")
	}
	if g := b.json(t, "GET", "/v1/subscriptions/"+c.ID, ""); strings.Contains(string(g.body), strings.TrimPrefix(rot.Secret, "whsec_")) ||
		!strings.Contains(string(g.body), "previous_secret_valid_until") {
		t.Fatalf("GET after rotation: %s", g.body)
	}

	setStatus(t, b.store, "m1", wamux.StatusSent)
	// The first event may come again (same webhook-id) when it was in
	// flight as the rotation restarted delivery.
	var d hookDelivery
	for n := 2; d.status != "sent"; n++ {
		ds := h.waitN(t, n)
		d = ds[n-1]
		if d.status != "sent" && d.header.Get("webhook-id") != first.header.Get("webhook-id") {
			t.Fatalf("delivery %d is %q", n, d.body)
		}
	}
	if n := len(strings.Fields(d.header.Get("webhook-signature"))); n != 2 {
		t.Fatalf("%d signatures during the overlap, want 2: %q", n, d.header.Get("webhook-signature"))
	}
	for name, v := range map[string]*webhooksig.Verifier{"old secret": oldOnly, "new secret": newOnly} {
		if err := v.Verify(d.header, d.body); err != nil {
			t.Errorf("after the rotation a verifier with only the %s fails: %v", name, err)
		}
	}
	stored, _ := b.store.GetSubscription(context.Background(), c.ID)
	if !strings.HasPrefix(stored.Secret, "sealed:v1:") || !strings.HasPrefix(stored.OldSecret, "sealed:v1:") {
		t.Fatalf("after rotation the secrets are stored as %q and %q", stored.Secret, stored.OldSecret)
	}
}

func TestSubscriptionReplayRedelivers(t *testing.T) {
	b := newEventsBundle(t, &netguard.Guard{Allow: loopback})
	h := newHook(t)
	since := time.Now().Add(-time.Second).UTC()
	c := b.subscribe(t, `{"url":"`+h.srv.URL+`/in","events":["message.status"]}`)
	addMessage(t, b.store, "m1")
	for _, s := range []wamux.Status{wamux.StatusAccepted, wamux.StatusSent, wamux.StatusDelivered} {
		setStatus(t, b.store, "m1", s)
	}
	before := h.waitN(t, 3)
	ids := map[string]string{}
	for _, d := range before {
		ids[d.header.Get("webhook-id")] = string(d.body)
	}
	if len(ids) != 3 {
		t.Fatalf("3 events came under %d webhook-ids", len(ids))
	}

	for _, body := range []string{`{}`, `{"since":"yesterday"}`, `{"since":"2026-01-01T00:00:00Z","x":1}`} {
		if r := b.json(t, "POST", "/v1/subscriptions/"+c.ID+"/replay", body); r.status != http.StatusBadRequest {
			t.Fatalf("replay %s = %d %s, want 400", body, r.status, r.body)
		}
	}
	if got := len(h.deliveries()); got != 3 {
		t.Fatalf("refused replays caused %d more deliveries", got-3)
	}
	r := b.json(t, "POST", "/v1/subscriptions/"+c.ID+"/replay", `{"since":"`+since.Format(time.RFC3339Nano)+`"}`)
	if r.status != http.StatusAccepted {
		t.Fatalf("replay = %d %s", r.status, r.body)
	}
	again := h.waitN(t, 6)[3:]
	for _, d := range again {
		id := d.header.Get("webhook-id")
		body, ok := ids[id]
		if !ok {
			t.Fatalf("replay delivered %s, not one of the events already delivered", id)
		}
		if body != string(d.body) {
			t.Fatalf("%s replayed with another body:\n%s\n%s", id, body, d.body)
		}
		delete(ids, id)
	}
	if len(ids) != 0 {
		t.Fatalf("not replayed: %v", ids)
	}
}

// feedPage is a /v1/events answer.
type feedPage struct {
	Events []struct {
		ID   string         `json:"id"`
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	} `json:"events"`
	Next string `json:"next"`
}

func (b *eventsBundle) feed(t *testing.T, query string) feedPage {
	t.Helper()
	r := b.json(t, "GET", "/v1/events"+query, "")
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/events%s = %d %s", query, r.status, r.body)
	}
	var p feedPage
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEventsFeedPaging(t *testing.T) {
	b := newEventsBundle(t, &netguard.Guard{Allow: loopback})
	addMessage(t, b.store, "m1")
	addMessage(t, b.store, "m2")
	for _, s := range []wamux.Status{wamux.StatusAccepted, wamux.StatusSent} {
		setStatus(t, b.store, "m1", s)
		setStatus(t, b.store, "m2", s)
	}
	setStatus(t, b.store, "m1", wamux.StatusDelivered)

	all := b.feed(t, "?limit=1000")
	if len(all.Events) != 5 || all.Next == "" {
		t.Fatalf("feed = %+v, want 5 events", all)
	}
	var paged []string
	after, pages := "", 0
	for {
		p := b.feed(t, "?limit=2&after="+after)
		if len(p.Events) == 0 {
			if p.Next != after {
				t.Fatalf("an empty page moved the cursor from %q to %q", after, p.Next)
			}
			break
		}
		if len(p.Events) > 2 {
			t.Fatalf("limit=2 listed %d", len(p.Events))
		}
		pages++
		for _, e := range p.Events {
			paged = append(paged, e.ID)
		}
		after = p.Next
	}
	var want []string
	for i, e := range all.Events {
		want = append(want, e.ID)
		if !strings.HasPrefix(e.ID, "evt_") || e.Type != "message.status" || e.Data["msg_id"] == nil {
			t.Fatalf("event %d = %+v", i, e)
		}
	}
	if fmt.Sprint(paged) != fmt.Sprint(want) || pages != 3 {
		t.Fatalf("pages of 2 listed %v in %d pages, want %v in 3", paged, pages, want)
	}
	if after != all.Next {
		t.Fatalf("the last page's cursor %q differs from the full listing's %q", after, all.Next)
	}
	if p := b.feed(t, "?limit=1&wait=0"); len(p.Events) != 1 || p.Events[0].ID != want[0] {
		t.Fatalf("limit=1: %+v", p)
	}
	// With events to list, the longest wait answers at once.
	if p := b.feed(t, "?wait=60&limit=1000"); len(p.Events) != 5 {
		t.Fatalf("wait=60 listed %d", len(p.Events))
	}

	for _, q := range []string{"?after=abc", "?after=-3", "?limit=0", "?limit=1001", "?limit=ten", "?limit=-1",
		"?wait=-1", "?wait=61", "?wait=61s", "?wait=2m", "?wait=soon", "?wait=-1s", "?cursor=1", "?after=1&foo=bar"} {
		r := b.json(t, "GET", "/v1/events"+q, "")
		if r.status != http.StatusBadRequest {
			t.Errorf("GET /v1/events%s = %d %s, want 400", q, r.status, r.body)
			continue
		}
		errorOf(t, r)
	}
}

func TestEventsLongPollAnswersWhenAnEventIsWritten(t *testing.T) {
	b := newEventsBundle(t, &netguard.Guard{Allow: loopback})
	addMessage(t, b.store, "m1")
	head := b.feed(t, "").Next
	select { // that read found nothing too
	case <-b.emptyReads:
	default:
	}

	type answer struct {
		r   response
		err error
	}
	got := make(chan answer, 1)
	start := time.Now()
	go func() {
		req, _ := http.NewRequest("GET", b.srv.URL+"/v1/events?wait=30&after="+head, nil)
		req.Header.Set("Authorization", "Bearer "+testKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer res.Body.Close()
		raw, err := io.ReadAll(res.Body)
		got <- answer{r: response{status: res.StatusCode, header: res.Header, body: raw}, err: err}
	}()
	// The request has read the feed and found it empty: it is waiting.
	select {
	case <-b.emptyReads:
	case a := <-got:
		t.Fatalf("the long poll answered with nothing written: %d %s %v", a.r.status, a.r.body, a.err)
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll did not read the feed")
	}
	setStatus(t, b.store, "m1", wamux.StatusAccepted)
	var a answer
	select {
	case a = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll did not answer within 10 s of the event")
	}
	if a.err != nil || a.r.status != http.StatusOK {
		t.Fatalf("long poll = %d %s %v", a.r.status, a.r.body, a.err)
	}
	var p feedPage
	json.Unmarshal(a.r.body, &p)
	if len(p.Events) != 1 || p.Events[0].Data["msg_id"] != "m1" || p.Events[0].Data["status"] != "accepted" || p.Next == head {
		t.Fatalf("long poll answered %s", a.r.body)
	}
	if d := time.Since(start); d >= 30*time.Second {
		t.Fatalf("the long poll took %v", d)
	}

	// A short wait with nothing new answers empty with the same cursor.
	short := b.feed(t, "?wait=50ms&after="+p.Next)
	if len(short.Events) != 0 || short.Next != p.Next {
		t.Fatalf("empty long poll = %+v", short)
	}
}

// A destination is checked again when a delivery connects: a name that
// resolved to a public address when the subscription was made and resolves
// to loopback later is refused, and the refusal is shown.
func TestDeliveryRefusedWhenNameRebindsToLoopback(t *testing.T) {
	var conns atomic.Int32
	recv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	recv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	recv.StartTLS()
	defer recv.Close()
	_, port, _ := net.SplitHostPort(recv.Listener.Addr().String())

	var answer atomic.Value
	answer.Store("93.184.216.34")
	g := &netguard.Guard{LookupIPAddr: func(_ context.Context, host string) ([]net.IPAddr, error) {
		if host != "hook.example" {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		return []net.IPAddr{{IP: net.ParseIP(answer.Load().(string))}}, nil
	}}
	b := newEventsBundle(t, g)
	c := b.subscribe(t, `{"url":"https://hook.example:`+port+`/in","events":["message.status"]}`)
	answer.Store("127.0.0.1")
	addMessage(t, b.store, "m1")
	setStatus(t, b.store, "m1", wamux.StatusAccepted)

	var view struct {
		Subscription struct {
			Pending int `json:"pending"`
		} `json:"subscription"`
		Attempts []struct {
			EventID string `json:"event_id"`
			Error   string `json:"error"`
		} `json:"attempts"`
	}
	testwait.For(t, "a refused attempt listed", 10*time.Second, func() bool {
		r := b.json(t, "GET", "/v1/subscriptions/"+c.ID+"/deliveries", "")
		json.Unmarshal(r.body, &view)
		return len(view.Attempts) > 0
	})
	e := view.Attempts[len(view.Attempts)-1].Error
	if !strings.Contains(e, "127.0.0.1") || !strings.Contains(e, "loopback") {
		t.Fatalf("attempt error %q does not name the refused address", e)
	}
	if view.Subscription.Pending != 1 {
		t.Fatalf("pending = %d, want the refused event kept", view.Subscription.Pending)
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("the loopback receiver got %d connections", n)
	}
}
