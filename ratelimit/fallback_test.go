package ratelimit_test

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/ratelimit/ratelimittest"
)

// TestFallbackConformance: over a shared limiter that answers, Fallback
// is that limiter (redislimit's tests cut Redis off).
func TestFallbackConformance(t *testing.T) {
	t.Parallel()
	ratelimittest.Run(t, func(t *testing.T, clk wamux.Clock) ratelimit.Limiter {
		f, err := ratelimit.NewFallback(ratelimit.FallbackConfig{Shared: newLocal(t, clk), Share: 0.5, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		return f
	})
}

// TestPairsFallbackConformance: over a shared pair limiter that answers,
// PairsFallback paces as that limiter does (redislimit's tests cut Redis
// off).
func TestPairsFallbackConformance(t *testing.T) {
	t.Parallel()
	ratelimittest.RunPairs(t, func(t *testing.T, clk wamux.Clock, interval time.Duration, burst int) ratelimit.Pairs {
		f, err := ratelimit.NewPairsFallback(ratelimit.PairsFallbackConfig{Shared: newPairs(t, clk, interval, burst), Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}, ratelimittest.PairOptions{})
}

// TestDegradedGaugesShareOneRegistry: the limiter's, the pairs' and the
// app pauses' fallbacks export one metric, wamux_ratelimit_degraded, told apart by
// what.
func TestDegradedGaugesShareOneRegistry(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New()
	reg := prometheus.NewRegistry()
	if _, err := ratelimit.NewFallback(ratelimit.FallbackConfig{Shared: newLocal(t, clk), Share: 1, Clock: clk, Registry: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := ratelimit.NewPairsFallback(ratelimit.PairsFallbackConfig{Shared: newPairs(t, clk, 0, 0), Clock: clk, Registry: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := ratelimit.NewAppPauseFallback(ratelimit.AppPauseFallbackConfig{Shared: ratelimit.NewLocalAppPause(clk), Clock: clk, Registry: reg}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetName() != "wamux_ratelimit_degraded" {
		t.Fatalf("gather: %v, %d families; want one, wamux_ratelimit_degraded", err, len(mfs))
	}
	var whats []string
	for _, m := range mfs[0].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "what" {
				whats = append(whats, l.GetValue())
			}
		}
	}
	if !slices.Equal(whats, []string{"limiter", "pairs", "pause"}) {
		t.Fatalf("what labels %q, want limiter, pairs and pause", whats)
	}
}
