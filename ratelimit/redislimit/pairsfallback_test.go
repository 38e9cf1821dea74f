package redislimit_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/redistest"
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/ratelimit/ratelimittest"
)

func pairsFallback(t *testing.T, shared ratelimit.Pairs, clk wamux.Clock, reg prometheus.Registerer) *ratelimit.PairsFallback {
	t.Helper()
	f, err := ratelimit.NewPairsFallback(ratelimit.PairsFallbackConfig{Shared: shared, Clock: clk, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestPairsFallbackConformance: with Redis up, PairsFallback over
// redislimit.Pairs passes the pair suite, two nodes sharing one pair.
func TestPairsFallbackConformance(t *testing.T) {
	var last struct {
		prefix string
		t      *testing.T
	}
	ratelimittest.RunPairs(t, func(t *testing.T, clk wamux.Clock, interval time.Duration, burst int) ratelimit.Pairs {
		rdb, prefix := redistest.Client(t)
		last.prefix, last.t = prefix, t
		return pairsFallback(t, newPairsOn(t, rdb, prefix, clk, interval, burst), clk, nil)
	}, ratelimittest.PairOptions{NewNode: func(t *testing.T, clk wamux.Clock, interval time.Duration, burst int) ratelimit.Pairs {
		if last.t != t {
			t.Fatal("NewNode called before NewPairs in the same test")
		}
		rdb, _ := redistest.Client(t)
		return pairsFallback(t, newPairsOn(t, rdb, last.prefix, clk, interval, burst), clk, nil)
	}})
}

// TestPairsFallbackWhileRedisIsCut: with Redis cut off a node paces pairs
// on its own, remembering those it sent to before the cut, and says so in
// wamux_ratelimit_degraded{what="pairs"}; once Redis answers (at the next
// probe) the pairs are shared again, and a pair sent to during the cut
// still waits on this node though Redis never learned of it.
func TestPairsFallbackWhileRedisIsCut(t *testing.T) {
	proxy := redistest.NewCutProxy(t)
	rdbDirect, prefix := redistest.Client(t)
	clk := fakeclock.New()
	const iv = 6 * time.Second
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	reg := prometheus.NewRegistry()
	f := pairsFallback(t, newPairsOn(t, rdb, prefix, clk, iv, 1), clk, reg)
	other := newPairsOn(t, rdbDirect, prefix, clk, iv, 1) // another node, never cut off
	ctx := t.Context()
	reserve := func(to string) (bool, time.Duration) {
		t.Helper()
		ok, w, err := f.Reserve(ctx, "acc", to)
		if err != nil {
			t.Fatalf("Reserve(%s): %v", to, err)
		}
		return ok, w
	}
	otherWait := func(to string) time.Duration {
		t.Helper()
		w, err := other.Wait(ctx, "acc", to)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}

	if ok, _ := reserve("before"); !ok || otherWait("before") != iv {
		t.Fatal("with Redis up, a send is not paced in Redis")
	}

	proxy.Cut()
	clk.Advance(time.Second)
	if ok, _ := reserve("during"); !ok {
		t.Fatal("with Redis cut, a quiet pair may not send")
	}
	if !f.Degraded() || gauge(t, reg) != 1 {
		t.Fatalf("with Redis cut: degraded %v, gauge %v; want both set", f.Degraded(), gauge(t, reg))
	}
	if ok, w := reserve("during"); ok || w != iv {
		t.Fatalf("with Redis cut, a second send at once: ok=%v wait=%v; want the pair's %v", ok, w, iv)
	}
	if ok, w := reserve("before"); ok || w != iv-time.Second {
		t.Fatalf("with Redis cut, a pair sent to before the cut: ok=%v wait=%v; want the rest of its interval", ok, w)
	}

	proxy.Restore()
	clk.Advance(ratelimit.ProbeEveryDefault)
	if ok, _ := reserve("after"); !ok {
		t.Fatal("with Redis back, a quiet pair may not send")
	}
	if f.Degraded() || gauge(t, reg) != 0 {
		t.Fatalf("with Redis back: degraded %v, gauge %v; want both clear", f.Degraded(), gauge(t, reg))
	}
	if w := otherWait("after"); w != iv {
		t.Fatalf("with Redis back, another node waits %v for the pair, want %v: the send is shared again", w, iv)
	}
	if otherWait("during") != 0 {
		t.Fatal("Redis learned of a send made while it was cut off")
	}
	if ok, w := reserve("during"); ok || w <= 0 {
		t.Fatalf("with Redis back, a pair sent to during the cut: ok=%v wait=%v; want it still paced here", ok, w)
	}
}
