package redislimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/redistest"
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/ratelimit/ratelimittest"
	"github.com/wamux/wamux/ratelimit/redislimit"
)

func TestDeparturesConformance(t *testing.T) {
	var last struct {
		prefix string
		t      *testing.T
	}
	build := func(t *testing.T, clk wamux.Clock, prefix string) ratelimit.Departures {
		rdb, p := redistest.Client(t)
		if prefix == "" {
			prefix = p
		}
		last.prefix, last.t = prefix, t
		d, err := redislimit.NewDepartures(redislimit.DeparturesConfig{Client: rdb, Prefix: prefix, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	ratelimittest.RunDepartures(t, func(t *testing.T, clk wamux.Clock) ratelimit.Departures {
		return build(t, clk, "")
	}, ratelimittest.DeparturesOptions{NewNode: func(t *testing.T, clk wamux.Clock) ratelimit.Departures {
		if last.t != t {
			t.Fatal("NewNode called before NewDepartures in the same test")
		}
		return build(t, clk, last.prefix)
	}})
}

// TestDeparturesFallbackWhileRedisIsCut: with Redis cut off a node books
// on its own schedule and says so in wamux_ratelimit_degraded; once Redis
// answers again it books on the shared schedule again.
func TestDeparturesFallbackWhileRedisIsCut(t *testing.T) {
	proxy := redistest.NewCutProxy(t)
	_, prefix := redistest.Client(t)
	clk := fakeclock.New()
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	shared, err := redislimit.NewDepartures(redislimit.DeparturesConfig{Client: rdb, Prefix: prefix, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	f, err := ratelimit.NewDeparturesFallback(ratelimit.DeparturesFallbackConfig{Shared: shared, Clock: clk, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	book := func() time.Duration {
		t.Helper()
		w, err := f.Reserve(context.Background(), "acc", 10, 1)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	if w := book(); w != 0 || f.Degraded() {
		t.Fatalf("first booking waits %v (degraded %v); want 0 on the shared schedule", w, f.Degraded())
	}
	proxy.Cut()
	if w := book(); w != 0 || !f.Degraded() {
		t.Fatalf("booking with Redis cut waits %v (degraded %v); want 0 on this node's new schedule", w, f.Degraded())
	}
	if g := gauge(t, reg); g != 1 {
		t.Fatalf("wamux_ratelimit_degraded{what=departures} = %v while Redis is cut; want 1", g)
	}
	proxy.Restore()
	clk.Advance(ratelimit.ProbeEveryDefault)
	// The shared schedule's one booking is long past; then it paces
	// again.
	if w := book(); w != 0 {
		t.Fatalf("booking after Redis returned waits %v, want 0", w)
	}
	if w := book(); w != 100*time.Millisecond {
		t.Fatalf("second booking after Redis returned waits %v, want one interval", w)
	}
	if f.Degraded() {
		t.Fatal("still degraded after Redis answered again")
	}
	if g := gauge(t, reg); g != 0 {
		t.Fatalf("wamux_ratelimit_degraded{what=departures} = %v after Redis returned; want 0", g)
	}
	if _, err := ratelimit.NewDeparturesFallback(ratelimit.DeparturesFallbackConfig{}); err == nil {
		t.Fatal("a fallback without a shared schedule was built")
	}
}
