package redisbloom_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/redistest"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/receipts/filtertest"
	"github.com/wamux/wamux/receipts/redisbloom"
	"github.com/wamux/wamux/store"
)

func run(t *testing.T, mode redisbloom.Mode) {
	prefixes := map[*testing.T]string{}
	build := func(t *testing.T, cfg receipts.BloomConfig) receipts.Filter {
		rdb, prefix := redistest.Client(t)
		if p, ok := prefixes[t]; ok {
			prefix = p
		}
		prefixes[t] = prefix
		f, err := redisbloom.New(t.Context(), redisbloom.Config{Client: rdb, Prefix: prefix, Bloom: cfg, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	filtertest.Run(t, build, filtertest.Options{NewNode: build})
}

// TestConformanceBitmaps runs the filter suite on bitmaps, which every
// redis-server has.
func TestConformanceBitmaps(t *testing.T) { run(t, redisbloom.ModeBitmap) }

// TestConformanceModule runs it on BF.* filters when the test server has
// the RedisBloom module.
func TestConformanceModule(t *testing.T) {
	rdb, prefix := redistest.Client(t)
	f, err := redisbloom.New(t.Context(), redisbloom.Config{Client: rdb, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if f.Mode() != redisbloom.ModeModule {
		t.Skipf("the test server has no RedisBloom module (auto mode chose %s)", f.Mode())
	}
	run(t, redisbloom.ModeModule)
}

// TestHourKeysExpire: an hour's filter lives until BloomHours after the
// end of its hour, and no longer.
func TestHourKeysExpire(t *testing.T) {
	rdb, prefix := redistest.Client(t)
	f, err := redisbloom.New(t.Context(), redisbloom.Config{Client: rdb, Prefix: prefix, Mode: redisbloom.ModeBitmap,
		Bloom: receipts.BloomConfig{ExpectedPerHour: 100}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 10, 45, 0, 0, time.UTC) // 15 min before its hour ends
	if err := f.Insert(t.Context(), [][]byte{[]byte("k")}, at); err != nil {
		t.Fatal(err)
	}
	keys, err := rdb.Keys(t.Context(), prefix+"*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %v, %v; want the hour's one", keys, err)
	}
	want := receipts.BloomHours*time.Hour + 15*time.Minute
	if ttl, err := rdb.PTTL(t.Context(), keys[0]).Result(); err != nil || ttl > want || ttl < want-time.Minute {
		t.Fatalf("hour key TTL = %v, %v; want about %v", ttl, err, want)
	}
}

// TestUnreachableRedisLosesNothing: with Redis gone, L2 answers "maybe"
// for every key, so the store decides: new receipts stay new and stored
// ones are duplicates.
func TestUnreachableRedisLosesNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a port nothing listens on
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	f, err := redisbloom.New(t.Context(), redisbloom.Config{Client: rdb, Mode: redisbloom.ModeBitmap})
	if err != nil {
		t.Fatal(err)
	}
	l2 := receipts.NewFilterDedup(f, nil, nil, true)
	old := store.ReceiptKey{AccountID: "a", MessageID: "wamid.1", Type: wamux.ReceiptDelivered}
	fresh := store.ReceiptKey{AccountID: "a", MessageID: "wamid.2", Type: wamux.ReceiptDelivered}
	st := confirmer{old: true}
	dup, stats, err := l2.Dedup(context.Background(), []store.ReceiptKey{old, fresh}, nil, st)
	if err != nil {
		t.Fatal(err)
	}
	if !dup[0] || dup[1] || stats.Checked != 2 {
		t.Fatalf("dup %v, stats %+v; want the stored key a duplicate, the new one new, both checked in the store", dup, stats)
	}
}

// confirmer is a store holding the keys set true.
type confirmer map[store.ReceiptKey]bool

func (c confirmer) HasReceipts(_ context.Context, keys []store.ReceiptKey) ([]bool, error) {
	out := make([]bool, len(keys))
	for i, k := range keys {
		out[i] = c[k]
	}
	return out, nil
}

func (c confirmer) HasCallbackReceipts(ctx context.Context, keys []store.ReceiptKey) ([]bool, error) {
	return c.HasReceipts(ctx, keys)
}
