package redislimit_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/redistest"
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/ratelimit/redislimit"
)

// TestFallbackLocalShareWhileRedisIsCut: two nodes share an account's
// bucket in Redis; with Redis cut off each goes on sending at its local
// share (half the rate here) and says so in wamux_ratelimit_degraded;
// once Redis answers again they share its bucket again.
func TestFallbackLocalShareWhileRedisIsCut(t *testing.T) {
	proxy := redistest.NewCutProxy(t)
	_, prefix := redistest.Client(t)
	clk := fakeclock.New()
	const rate, burst, share = 100.0, 10, 0.5
	type node struct {
		f   *ratelimit.Fallback
		reg *prometheus.Registry
	}
	var nodes []node
	for range 2 {
		rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1,
			DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
		t.Cleanup(func() { rdb.Close() })
		shared, err := redislimit.New(redislimit.Config{Client: rdb, Prefix: prefix, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		f, err := ratelimit.NewFallback(ratelimit.FallbackConfig{Shared: shared, Share: share, Clock: clk, Registry: reg})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.SetLimit(t.Context(), "acc", rate, burst); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, node{f, reg})
	}
	drain := func(f *ratelimit.Fallback) int {
		n := 0
		for {
			ok, _, err := f.Reserve(t.Context(), "acc", 1)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return n
			}
			n++
		}
	}
	degraded := func(n node) float64 {
		return gauge(t, n.reg)
	}

	if got := drain(nodes[0].f) + drain(nodes[1].f); got != burst {
		t.Fatalf("two nodes on the shared bucket got %d at once, want its burst %d", got, burst)
	}

	proxy.Cut()
	clk.Advance(time.Second)
	const window = 2 * time.Second
	sent := 0
	for end := clk.Now().Add(window); clk.Now().Before(end); clk.Advance(10 * time.Millisecond) {
		sent += drain(nodes[0].f)
	}
	if !nodes[0].f.Degraded() || degraded(nodes[0]) != 1 {
		t.Fatalf("with Redis cut: degraded %v, gauge %v; want both set", nodes[0].f.Degraded(), degraded(nodes[0]))
	}
	localMax := rate*share*window.Seconds() + burst*share
	if float64(sent) > localMax || float64(sent) < 0.9*rate*share*window.Seconds() {
		t.Fatalf("with Redis cut one node sent %d in %v, want close to and at most its share, %v", sent, window, localMax)
	}
	t.Logf("with Redis cut: %d sends in %v on one node (share %v of %v/s)", sent, window, share, rate)

	proxy.Restore()
	clk.Advance(ratelimit.ProbeEveryDefault)
	for _, n := range nodes {
		drain(n.f)
		if n.f.Degraded() || degraded(n) != 0 {
			t.Fatalf("with Redis back: degraded %v, gauge %v; want both clear", n.f.Degraded(), degraded(n))
		}
	}
	// Back on the shared bucket: a second at 100/s is 100 sends for both
	// nodes together, not 100 each.
	clk.Advance(time.Second)
	if got := drain(nodes[0].f) + drain(nodes[1].f); got != burst {
		t.Fatalf("back on Redis, two nodes got %d at once, want the shared burst %d", got, burst)
	}
	sent = 0
	for end := clk.Now().Add(time.Second); clk.Now().Before(end); clk.Advance(10 * time.Millisecond) {
		sent += drain(nodes[0].f) + drain(nodes[1].f)
	}
	if sent > rate+1 || sent < 0.95*rate {
		t.Fatalf("back on Redis, two nodes sent %d in a second, want the shared rate %v", sent, rate)
	}
}

// gauge reads the one gauge reg holds.
func gauge(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 {
		t.Fatalf("gather: %v, %d families", err, len(mfs))
	}
	return mfs[0].GetMetric()[0].GetGauge().GetValue()
}
