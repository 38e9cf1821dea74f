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
	"github.com/wamux/wamux/ratelimit/redislimit"
)

func pauseFallback(t *testing.T, rdb redis.Scripter, prefix string, clk wamux.Clock, reg prometheus.Registerer) *ratelimit.AppPauseFallback {
	t.Helper()
	shared, err := redislimit.NewAppPause(redislimit.AppPauseConfig{Client: rdb, Prefix: prefix, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	f, err := ratelimit.NewAppPauseFallback(ratelimit.AppPauseFallbackConfig{Shared: shared, Clock: clk, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestAppPauseFallbackConformance: with Redis up, AppPauseFallback over
// redislimit.AppPause passes the pause suite, two nodes sharing pauses.
func TestAppPauseFallbackConformance(t *testing.T) {
	var last struct {
		prefix string
		t      *testing.T
	}
	ratelimittest.RunAppPause(t, func(t *testing.T, clk wamux.Clock) ratelimit.AppPause {
		rdb, prefix := redistest.Client(t)
		last.prefix, last.t = prefix, t
		return pauseFallback(t, rdb, prefix, clk, nil)
	}, ratelimittest.AppPauseOptions{NewNode: func(t *testing.T, clk wamux.Clock) ratelimit.AppPause {
		if last.t != t {
			t.Fatal("NewNode called before NewAppPause in the same test")
		}
		rdb, _ := redistest.Client(t)
		return pauseFallback(t, rdb, last.prefix, clk, nil)
	}})
}

// TestAppPauseFallbackWhileRedisIsCut: with Redis cut off a node keeps
// the pause it sets (and one set before) and says so in
// wamux_ratelimit_degraded{what="pause"}; once Redis answers (at the
// next probe) the pause set meanwhile is published, so another node
// learns it.
func TestAppPauseFallbackWhileRedisIsCut(t *testing.T) {
	proxy := redistest.NewCutProxy(t)
	rdbDirect, prefix := redistest.Client(t)
	clk := fakeclock.New()
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	reg := prometheus.NewRegistry()
	f := pauseFallback(t, rdb, prefix, clk, reg)
	other, err := redislimit.NewAppPause(redislimit.AppPauseConfig{Client: rdbDirect, Prefix: prefix, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	check := func(p ratelimit.AppPause, app string, want time.Time, what string) {
		t.Helper()
		got, err := p.PausedUntil(ctx, app)
		if err != nil || !got.Equal(want) {
			t.Fatalf("%s: PausedUntil(%s) = %v, %v; want %v", what, app, got, err, want)
		}
	}
	before := clk.Now().Add(time.Minute)
	if _, err := f.Pause(ctx, "app-before", before); err != nil {
		t.Fatal(err)
	}
	check(other, "app-before", before, "with Redis up, another node")

	proxy.Cut()
	during := clk.Now().Add(2 * time.Minute)
	if got, err := f.Pause(ctx, "app-during", during); err != nil || !got.Equal(during) {
		t.Fatalf("with Redis cut, Pause = %v, %v; want %v", got, err, during)
	}
	if !f.Degraded() || gauge(t, reg) != 1 {
		t.Fatalf("with Redis cut: degraded %v, gauge %v; want both set", f.Degraded(), gauge(t, reg))
	}
	check(f, "app-during", during, "with Redis cut, this node")
	check(f, "app-before", before, "with Redis cut, this node")
	check(other, "app-during", time.Time{}, "with Redis cut, another node")

	proxy.Restore()
	clk.Advance(ratelimit.ProbeEveryDefault)
	check(f, "app-during", during, "with Redis back, this node")
	if f.Degraded() || gauge(t, reg) != 0 {
		t.Fatalf("with Redis back: degraded %v, gauge %v; want both clear", f.Degraded(), gauge(t, reg))
	}
	check(other, "app-during", during, "with Redis back, another node")
}
