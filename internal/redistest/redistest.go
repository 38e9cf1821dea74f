// Package redistest connects tests to the real redis-server named by
// WAMUX_TEST_REDIS (a redis:// URL or host:port; make test sets
// redis://127.0.0.1:6379/0), each test under a key prefix of its own that
// is deleted when it ends.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Env names the Redis URL the tests use; empty skips them.
const Env = "WAMUX_TEST_REDIS"

// Client returns a client of the test server and a fresh key prefix; the
// test is skipped when Env is empty and fails when the server does not
// answer.
func Client(t testing.TB) (*redis.Client, string) {
	t.Helper()
	url := os.Getenv(Env)
	if url == "" {
		t.Skip(Env + " is empty: no Redis to test against")
	}
	// A redis:// URL, or a bare host:port as .ci/run gives it.
	opt := &redis.Options{Addr: url}
	if strings.Contains(url, "://") {
		var err error
		if opt, err = redis.ParseURL(url); err != nil {
			t.Fatalf("%s: %v", Env, err)
		}
	}
	rdb := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		t.Fatalf("Redis at %s does not answer: %v", url, err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "wamuxtest:" + hex.EncodeToString(b) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
		rdb.Close()
	})
	return rdb, prefix
}
