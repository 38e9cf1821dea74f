package redislimit_test

import (
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/redistest"
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/ratelimit/ratelimittest"
	"github.com/wamux/wamux/ratelimit/redislimit"
)

func newLimiter(t *testing.T, clock wamux.Clock) ratelimit.Limiter {
	rdb, prefix := redistest.Client(t)
	l, err := redislimit.New(redislimit.Config{Client: rdb, Prefix: prefix, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestConformance runs the limiter suite on a real redis-server, on the
// suite's virtual time; its utilization window is 10 s of virtual time
// (some 22,000 round trips) instead of 100.
func TestConformance(t *testing.T) {
	ratelimittest.RunWith(t, newLimiter, ratelimittest.Options{UtilizationWindow: 10 * time.Second})
}

// TestNodesShareOneBucket: two limiters on one server (two gateway nodes)
// draw from the same bucket, so together they get its burst, not twice.
func TestNodesShareOneBucket(t *testing.T) {
	rdb, prefix := redistest.Client(t)
	clk := fakeclock.New()
	var nodes []*redislimit.Limiter
	for range 2 {
		l, err := redislimit.New(redislimit.Config{Client: rdb, Prefix: prefix, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, l)
	}
	if err := nodes[0].SetLimit(t.Context(), "acc", 10, 20); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	granted := 0
	var wg sync.WaitGroup
	for _, l := range nodes {
		for range 4 {
			wg.Go(func() {
				for range 20 {
					ok, _, err := l.Reserve(t.Context(), "acc", 1)
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						mu.Lock()
						granted++
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	if granted != 20 {
		t.Fatalf("two nodes, burst 20, no time passing: %d grants, want 20", granted)
	}
	clk.Advance(time.Second)
	if ok, _, err := nodes[1].Reserve(t.Context(), "acc", 10); err != nil || !ok {
		t.Fatalf("a second later at 10/s the other node gets 10: ok=%v err=%v", ok, err)
	}
}

// TestServerClock: without a Clock the server's TIME paces the bucket.
func TestServerClock(t *testing.T) {
	rdb, prefix := redistest.Client(t)
	l, err := redislimit.New(redislimit.Config{Client: rdb, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetLimit(t.Context(), "acc", 1, 3); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if ok, _, err := l.Reserve(t.Context(), "acc", 1); err != nil || !ok {
			t.Fatalf("grant %d of a full bucket of 3: ok=%v err=%v", i, ok, err)
		}
	}
	ok, wait, err := l.Reserve(t.Context(), "acc", 1)
	if err != nil || ok || wait <= 0 || wait > time.Second {
		t.Fatalf("fourth at 1/s: ok=%v wait=%v err=%v; want refused with a wait in (0, 1s]", ok, wait, err)
	}
	if err := l.Forget(t.Context(), "acc"); err != nil {
		t.Fatal(err)
	}
	if tok, err := l.Tokens(t.Context(), "acc"); err != nil || tok != ratelimit.DefaultBurst {
		t.Fatalf("tokens after Forget = %v, %v; want the default burst %d", tok, err, ratelimit.DefaultBurst)
	}
}
