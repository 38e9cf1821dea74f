package events_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/events"
	"github.com/wamux/wamux/internal/netguard"
	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/sqlite"
)

func openStore(t *testing.T, dir string) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "wamux.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// testSealer keeps secrets reversibly for tests.
type testSealer struct{}

func (testSealer) Seal(p string) (string, error) { return "sealed:" + p, nil }
func (testSealer) Open(s string) (string, error) { return strings.TrimPrefix(s, "sealed:"), nil }

type managerOpts struct {
	retryWindow time.Duration
}

func startManager(t *testing.T, st store.Store, o managerOpts) *events.Manager {
	t.Helper()
	vals := settings.Defaults()
	if o.retryWindow > 0 {
		vals.EventRetryWindow = o.retryWindow
	}
	m, err := events.New(events.Config{
		Store: st, Sealer: testSealer{}, Registry: prometheus.NewRegistry(),
		Logger:   slog.New(slog.DiscardHandler),
		Guard:    &netguard.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		Settings: func() settings.Values { return vals },
		Poll:     5 * time.Millisecond, IdlePoll: 20 * time.Millisecond,
		BackoffBase: 5 * time.Millisecond, BackoffCap: 40 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return m
}

// delivery is one request a receiver got.
type delivery struct {
	id, ts, sig string
	body        []byte
	status      int
	typ         string
	data        map[string]any
}

// receiver is an endpoint: answer decides each request's status.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	secret []byte
	mu     sync.Mutex
	got    []delivery
	answer func(n int) int // n counts requests from 0
	notify chan struct{}
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	r := &receiver{t: t, answer: answer, notify: make(chan struct{}, 1)}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) setSecret(s string) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
	if err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	r.secret = key
	r.mu.Unlock()
}

// signedBy checks a signature header with the HMAC written out here, not
// with the gateway's signer.
func signedBy(key []byte, id, ts string, body []byte, header string) bool {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, s := range strings.Fields(header) {
		if s == want {
			return true
		}
	}
	return false
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	d := delivery{id: req.Header.Get("webhook-id"), ts: req.Header.Get("webhook-timestamp"),
		sig: req.Header.Get("webhook-signature"), body: body}
	var env struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		r.t.Errorf("body is not JSON: %s", body)
	}
	d.typ, d.data = env.Type, env.Data
	r.mu.Lock()
	if r.secret != nil && !signedBy(r.secret, d.id, d.ts, body, d.sig) {
		r.t.Errorf("delivery %s: signature %q does not verify", d.id, d.sig)
	}
	d.status = r.answer(len(r.got))
	r.got = append(r.got, d)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
	w.WriteHeader(d.status)
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// waitFor waits on the receiver's requests until cond holds.
func (r *receiver) waitFor(what string, cond func([]delivery) bool) []delivery {
	r.t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		if ds := r.deliveries(); cond(ds) {
			return ds
		}
		select {
		case <-r.notify:
		case <-deadline.C:
			r.t.Fatalf("timed out waiting for %s; got %d requests", what, len(r.deliveries()))
		}
	}
}

// accepted are the distinct events answered 2xx, by webhook-id.
func accepted(ds []delivery) map[string]delivery {
	out := map[string]delivery{}
	for _, d := range ds {
		if d.status >= 200 && d.status < 300 {
			out[d.id] = d
		}
	}
	return out
}

func subscribe(t *testing.T, m *events.Manager, r *receiver, types ...wamux.EventType) wamux.Subscription {
	t.Helper()
	if len(types) == 0 {
		types = []wamux.EventType{wamux.EventAny}
	}
	s, secret, err := m.Create(t.Context(), events.NewSubscription{URL: r.srv.URL + "/hook", Events: types})
	if err != nil {
		t.Fatal(err)
	}
	r.setSecret(secret)
	return s
}

// progress moves a message through statuses; each change is an event.
func progress(t *testing.T, st store.Store, id string, statuses ...wamux.Status) {
	t.Helper()
	ctx := context.Background()
	for _, s := range statuses {
		u := store.MessageUpdate{MsgID: id, Status: s}
		if s == wamux.StatusAccepted {
			u.WAMID = "wamid." + id
		}
		if _, err := st.UpdateMessage(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
}

func addMessages(t *testing.T, st store.Store, ids ...string) {
	t.Helper()
	var ms []wamux.Message
	for _, id := range ids {
		ms = append(ms, wamux.Message{ID: id, BizType: "otp", AccountID: "acc1", To: "15550001", Type: "text",
			Payload: []byte(`{"body":"x"}`), ContentHash: "h" + id, Status: wamux.StatusSending})
	}
	if _, err := st.InsertMessages(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
}

type storeMessageUpdate = store.MessageUpdate
