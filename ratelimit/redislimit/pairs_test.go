package redislimit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/redistest"
	"github.com/wamux/wamux/internal/seal"
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/ratelimit/ratelimittest"
	"github.com/wamux/wamux/ratelimit/redislimit"
)

func newPairsOn(t *testing.T, rdb *redis.Client, prefix string, clk wamux.Clock, interval time.Duration, burst int) *redislimit.Pairs {
	t.Helper()
	return newPairsKeyed(t, rdb, prefix, clk, interval, burst, testSecret)
}

// testSecret is a WAMUX_SECRET_KEY value: the base64 of 32 bytes.
const testSecret = "c2VjcmV0IGtleSBvZiB0aGUgcGFpciB0ZXN0cyEhISE="

func newPairsKeyed(t *testing.T, rdb *redis.Client, prefix string, clk wamux.Clock, interval time.Duration, burst int, secret string) *redislimit.Pairs {
	t.Helper()
	keys, err := seal.ParseKeys(secret)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := seal.New(keys...)
	if err != nil {
		t.Fatal(err)
	}
	rk, err := redislimit.RecipientKey(ring)
	if err != nil {
		t.Fatal(err)
	}
	p, err := redislimit.NewPairs(redislimit.PairsConfig{Client: rdb, Prefix: prefix, Clock: clk,
		Interval: interval, Burst: burst, RecipientKey: rk})
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

// TestPairsNeedARecipientKey: without a key NewPairs refuses to build,
// rather than naming recipients by a key anyone can read in the source.
func TestPairsNeedARecipientKey(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { rdb.Close() })
	if _, err := redislimit.NewPairs(redislimit.PairsConfig{Client: rdb}); err == nil {
		t.Fatal("NewPairs without RecipientKey succeeded")
	}
}

// TestRecipientKeyFromTheSecretKey: nodes given one secret key name a
// recipient alike and so pace its pair together; a node with another
// secret key names it otherwise.
func TestRecipientKeyFromTheSecretKey(t *testing.T) {
	rdb, prefix := redistest.Client(t)
	clk := fakeclock.New()
	const to = "15551234567"
	a := newPairsKeyed(t, rdb, prefix, clk, 6*time.Second, 1, testSecret)
	b := newPairsKeyed(t, rdb, prefix, clk, 6*time.Second, 1, testSecret+", "+otherSecret)
	c := newPairsKeyed(t, rdb, prefix, clk, 6*time.Second, 1, otherSecret)
	if ok, _, err := a.Reserve(t.Context(), "acc", to); err != nil || !ok {
		t.Fatalf("first send: ok=%v err=%v", ok, err)
	}
	if w, err := b.Wait(t.Context(), "acc", to); err != nil || w != 6*time.Second {
		t.Fatalf("a node with the same first key waits %v, %v; want the pair's 6s", w, err)
	}
	if w, err := c.Wait(t.Context(), "acc", to); err != nil || w != 0 {
		t.Fatalf("a node with another key waits %v, %v; want 0 (another name)", w, err)
	}
}

const otherSecret = "YW5vdGhlciBzZWNyZXQga2V5IG9mIHRoZSB0ZXN0cyE="
