package httpapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/store/sqlite"
)

// TestReadinessNamesEachDependency: /readyz asks the store and every
// configured dependency (cluster mode: Kafka, Redis) and answers 503
// naming the ones that do not answer, 200 when all do.
func TestReadinessNamesEachDependency(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "wamux.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	dial := func(ctx context.Context) error {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	}
	api, err := httpapi.New(httpapi.Config{
		Store: st, Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry(),
		APIKeys:     []string{testKey},
		ReadyChecks: []httpapi.ReadyCheck{{Name: "redis", Ping: dial}, {Name: "kafka", Ping: func(context.Context) error { return nil }}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{srv: httptest.NewServer(api), store: st}
	t.Cleanup(b.srv.Close)
	type answer struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
		Error  struct{ Message string }
	}
	read := func(wantStatus int) answer {
		t.Helper()
		r := b.do(t, "GET", "/readyz", "", nil)
		var a answer
		if r.status != wantStatus || json.Unmarshal(r.body, &a) != nil {
			t.Fatalf("/readyz = %d %s, want %d", r.status, r.body, wantStatus)
		}
		return a
	}
	if a := read(200); a.Status != "ready" || a.Checks["store"] != "ok" || a.Checks["redis"] != "ok" || a.Checks["kafka"] != "ok" {
		t.Fatalf("all up: %+v", a)
	}
	ln.Close()
	if a := read(503); a.Checks["redis"] != "unavailable" || a.Checks["kafka"] != "ok" || a.Checks["store"] != "ok" || a.Error.Message != "redis does not answer" {
		t.Fatalf("redis down: %+v", a)
	}
	st.Close()
	if a := read(503); a.Checks["store"] != "unavailable" || a.Error.Message != "store, redis do not answer" {
		t.Fatalf("store and redis down: %+v", a)
	}
}
