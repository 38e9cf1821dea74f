package ratelimit_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/ratelimit/ratelimittest"
)

func TestAppPauseConformance(t *testing.T) {
	t.Parallel()
	ratelimittest.RunAppPause(t, func(t *testing.T, clk wamux.Clock) ratelimit.AppPause {
		return ratelimit.NewLocalAppPause(clk)
	}, ratelimittest.AppPauseOptions{})
}

func TestAppKeyHidesTheToken(t *testing.T) {
	t.Parallel()
	k := ratelimit.AppKey("EAAGsecret", "https://graph.facebook.com")
	if strings.Contains(k, "secret") || len(k) != 32 {
		t.Fatalf("AppKey = %q; want 32 hex digits without the token", k)
	}
	if k == ratelimit.AppKey("EAAGsecret", "https://other.example") || k == ratelimit.AppKey("EAAGother", "https://graph.facebook.com") {
		t.Fatal("AppKey names two apps alike")
	}
}

// Pauses that are over are dropped, so the map holds only running ones.
func TestLocalAppPauseForgetsEndedPauses(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New()
	p := ratelimit.NewLocalAppPause(clk)
	for i := range 10_000 {
		if _, err := p.Pause(t.Context(), fmt.Sprint("app", i), clk.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		clk.Advance(100 * time.Millisecond)
	}
	if n := p.Len(); n > 200 {
		t.Fatalf("%d pauses kept, at most 10 running at a time", n)
	}
}

// TestAppPauseFallbackConformance: over shared pauses that answer,
// AppPauseFallback behaves as they do (redislimit's tests cut Redis off).
func TestAppPauseFallbackConformance(t *testing.T) {
	t.Parallel()
	ratelimittest.RunAppPause(t, func(t *testing.T, clk wamux.Clock) ratelimit.AppPause {
		f, err := ratelimit.NewAppPauseFallback(ratelimit.AppPauseFallbackConfig{Shared: ratelimit.NewLocalAppPause(clk), Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}, ratelimittest.AppPauseOptions{})
}
