package redislimit_test

import (
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/redistest"
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/ratelimit/ratelimittest"
	"github.com/wamux/wamux/ratelimit/redislimit"
)

func TestAppPauseConformance(t *testing.T) {
	var last struct {
		prefix string
		t      *testing.T
	}
	build := func(t *testing.T, clk wamux.Clock, prefix string) ratelimit.AppPause {
		rdb, p := redistest.Client(t)
		if prefix == "" {
			prefix = p
		}
		last.prefix, last.t = prefix, t
		ap, err := redislimit.NewAppPause(redislimit.AppPauseConfig{Client: rdb, Prefix: prefix, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		return ap
	}
	ratelimittest.RunAppPause(t, func(t *testing.T, clk wamux.Clock) ratelimit.AppPause {
		return build(t, clk, "")
	}, ratelimittest.AppPauseOptions{NewNode: func(t *testing.T, clk wamux.Clock) ratelimit.AppPause {
		if last.t != t {
			t.Fatal("NewNode called before NewAppPause in the same test")
		}
		return build(t, clk, last.prefix)
	}})
}

// TestAppPauseExpires: on the server's clock the pause's key lives until
// the pause ends, and no longer.
func TestAppPauseExpires(t *testing.T) {
	rdb, prefix := redistest.Client(t)
	ap, err := redislimit.NewAppPause(redislimit.AppPauseConfig{Client: rdb, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	app := ratelimit.AppKey("token", "https://graph.facebook.com")
	end := time.Now().Add(3 * time.Second)
	if u, err := ap.Pause(t.Context(), app, end); err != nil || !u.Equal(end.Truncate(time.Microsecond)) {
		t.Fatalf("Pause = %v, %v; want %v", u, err, end)
	}
	ttl, err := rdb.PTTL(t.Context(), prefix+"apppause:"+app).Result()
	if err != nil || ttl <= 2*time.Second || ttl > 3*time.Second {
		t.Fatalf("pause key TTL = %v, %v; want about 3s", ttl, err)
	}
}
