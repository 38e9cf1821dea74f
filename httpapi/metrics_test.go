package httpapi_test

import (
	"context"
	"log/slog"
	"math"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/store/sqlite"
)

// panickyLive is a dispatcher whose live view panics once broken is
// set, as a bug in a handler's dependencies would make it.
type panickyLive struct{ broken atomic.Bool }

func (l *panickyLive) check() {
	if l.broken.Load() {
		panic("live view broken")
	}
}

func (l *panickyLive) Tokens(string) (float64, bool)  { l.check(); return 0, true }
func (l *panickyLive) QueueDepth(string) [3]int       { l.check(); return [3]int{} }
func (l *panickyLive) CooldownUntil(string) time.Time { l.check(); return time.Time{} }

// series finds the metric of family name whose labels are exactly want.
func series(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) *dto.Metric {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(want) {
				continue
			}
			for _, l := range m.GetLabel() {
				if want[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

// TestPanicCountedAs500: a handler that panics is answered 500 by the
// recovery middleware, and that 500 is counted and timed under its route
// like any other. Otherwise the requests a bug breaks are the ones
// wamux_http_requests_total{code=~"5.."} and WamuxHTTPErrors never see.
func TestPanicCountedAs500(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "wamux.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	live := &panickyLive{}
	logs := &syncBuffer{}
	api, err := httpapi.New(httpapi.Config{
		Store:    st,
		Logger:   slog.New(slog.NewJSONHandler(logs, nil)),
		Registry: reg,
		APIKeys:  []string{testKey},
		Live:     live,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	b := &bundle{srv: srv, store: st, logs: logs}

	if r := b.json(t, "POST", "/v1/accounts", validAccount); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	live.broken.Store(true)
	r := b.do(t, "GET", "/ui/state", "", nil)
	if r.status != 500 {
		t.Fatalf("GET /ui/state with a panicking live view = %d, want 500", r.status)
	}
	if code := errorOf(t, r); code != "internal" {
		t.Fatalf("code %q, want internal", code)
	}
	m := series(t, reg, "wamux_http_requests_total", map[string]string{"route": "GET /ui/state", "code": "500"})
	if m == nil || m.GetCounter().GetValue() != 1 {
		t.Fatalf("wamux_http_requests_total{route=\"GET /ui/state\",code=\"500\"} = %v, want 1", m)
	}
	h := series(t, reg, "wamux_http_request_duration_seconds", map[string]string{"route": "GET /ui/state"})
	if h == nil || h.GetHistogram().GetSampleCount() != 1 {
		t.Fatalf("wamux_http_request_duration_seconds{route=\"GET /ui/state\"} = %v, want one observation", h)
	}
	// Counting it must not hide where it panicked: the stack logged is
	// the panic's own.
	if !strings.Contains(logs.String(), "handler panic") || !strings.Contains(logs.String(), "panickyLive).check") {
		t.Fatalf("the panic was not logged with its own stack:\n%s", logs.String())
	}
}

// TestRequestDurationBucketsFitStoreTimeout: a request that waits out the
// store timeout (a slow or stuck commit, what the p99 panel is watched
// for) lands in a finite bucket of wamux_http_request_duration_seconds.
// Past the last finite bucket a quantile reads as that bucket's bound,
// so the panel would flatten below the latency it is meant to show.
func TestRequestDurationBucketsFitStoreTimeout(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "wamux.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	api, err := httpapi.New(httpapi.Config{Store: st, Logger: slog.New(slog.DiscardHandler), Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	api.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/healthz", nil))
	h := series(t, reg, "wamux_http_request_duration_seconds", map[string]string{"route": "GET /healthz"})
	if h == nil {
		t.Fatal("GET /healthz was not timed")
	}
	var top float64
	for _, b := range h.GetHistogram().GetBucket() {
		if !math.IsInf(b.GetUpperBound(), 1) {
			top = b.GetUpperBound()
		}
	}
	if top < httpapi.StoreTimeoutDefault.Seconds() {
		t.Fatalf("the last finite bucket ends at %gs, below the default store timeout %v", top, httpapi.StoreTimeoutDefault)
	}
}
