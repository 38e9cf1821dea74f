package redislimit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/redistest"
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/ratelimit/ratelimittest"
	"github.com/wamux/wamux/ratelimit/redislimit"
)

func newPairsOn(t *testing.T, rdb *redis.Client, prefix string, clk wamux.Clock, interval time.Duration, burst int) *redislimit.Pairs {
	t.Helper()
	p, err := redislimit.NewPairs(redislimit.PairsConfig{Client: rdb, Prefix: prefix, Clock: clk, Interval: interval, Burst: burst})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPairsConformance runs the pair suite on a real redis-server; the
// second node of NodesShareOnePair is another client on the same keys.
func TestPairsConformance(t *testing.T) {
	var last struct {
		prefix string
		t      *testing.T
	}
	ratelimittest.RunPairs(t, func(t *testing.T, clk wamux.Clock, interval time.Duration, burst int) ratelimit.Pairs {
		rdb, prefix := redistest.Client(t)
		last.prefix, last.t = prefix, t
		return newPairsOn(t, rdb, prefix, clk, interval, burst)
	}, ratelimittest.PairOptions{NewNode: func(t *testing.T, clk wamux.Clock, interval time.Duration, burst int) ratelimit.Pairs {
		if last.t != t {
			t.Fatal("NewNode called before NewPairs in the same test")
		}
		rdb, _ := redistest.Client(t)
		return newPairsOn(t, rdb, last.prefix, clk, interval, burst)
	}})
}

// TestPairKeysHideRecipients: a pair's key names its recipient by an HMAC,
// never the number, and expires once the pair owes nothing (the server's
// clock paces it here).
func TestPairKeysHideRecipients(t *testing.T) {
	rdb, prefix := redistest.Client(t)
	p := newPairsOn(t, rdb, prefix, nil, 2*time.Second, 1)
	const to = "15551234567"
	if ok, _, err := p.Reserve(t.Context(), "acc", to); err != nil || !ok {
		t.Fatalf("first send to a quiet pair: ok=%v err=%v", ok, err)
	}
	keys, err := rdb.Keys(t.Context(), prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || strings.Contains(keys[0], to) || !strings.HasPrefix(keys[0], prefix+"pair:acc:") {
		t.Fatalf("keys %v: want one pair key of acc without the number", keys)
	}
	ttl, err := rdb.PTTL(t.Context(), keys[0]).Result()
	if err != nil || ttl <= 0 || ttl > 2*time.Second {
		t.Fatalf("pair key TTL = %v, %v; want in (0, 2s], the time until its debt is repaid", ttl, err)
	}
	if ok, w, err := p.Reserve(t.Context(), "acc", to); err != nil || ok || w <= 0 || w > 2*time.Second {
		t.Fatalf("second send at once: ok=%v wait=%v err=%v; want refused within the interval", ok, w, err)
	}
}
