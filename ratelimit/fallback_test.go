package ratelimit_test

import (
	"testing"

	"github.com/wamux/wamux"
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
