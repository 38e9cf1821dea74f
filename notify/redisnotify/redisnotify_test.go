package redisnotify_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/redistest"
	"github.com/wamux/wamux/notify"
	"github.com/wamux/wamux/notify/notifytest"
	"github.com/wamux/wamux/notify/redisnotify"
	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/settings/settingstest"
	"github.com/wamux/wamux/store/sqlite"
)

// TestConformance runs the suite with every Notifier of a test a node of
// its own (a client of its own) on one prefix.
func TestConformance(t *testing.T) {
	prefixes := map[*testing.T]string{}
	notifytest.Run(t, func(t *testing.T) notify.Notifier {
		rdb, prefix := redistest.Client(t)
		if p, ok := prefixes[t]; ok {
			prefix = p
		}
		prefixes[t] = prefix
		n, err := redisnotify.New(redisnotify.Config{Client: rdb, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}, notifytest.Options{Nodes: true})
}

// TestAccountChanges: account changes announced on one node reach
// another through Redis.
func TestAccountChanges(t *testing.T) {
	rdb, prefix := redistest.Client(t)
	notifytest.RunAccountChanges(t, func(t *testing.T) notify.Notifier {
		n, err := redisnotify.New(redisnotify.Config{Client: rdb, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}, notifytest.Options{Nodes: true})
}

// TestAccountChangesResumed: a node cut off Redis is told when its
// account change subscription is made again, when any account may have
// changed unannounced.
func TestAccountChangesResumed(t *testing.T) {
	proxy := redistest.NewCutProxy(t)
	_, prefix := redistest.Client(t)
	resumed := make(chan struct{}, 16)
	stop, err := notify.NewAccountChanges(proxied(t, proxy, prefix), nil).Subscribe(t.Context(),
		func(string) {}, func() { resumed <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	proxy.Cut()
	proxy.Restore()
	select {
	case <-resumed:
	case <-time.After(resumeWithin):
		t.Fatalf("not told of the resubscription within %v of Redis answering", resumeWithin)
	}
}

// TestSettingsReachEveryNode: a settings change on one node reaches a
// second node's Manager over one store through Redis within a second.
func TestSettingsReachEveryNode(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "w.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	_, prefix := redistest.Client(t)
	settingstest.RunShared(t, st, func(t *testing.T) notify.Notifier {
		rdb, _ := redistest.Client(t)
		n, err := redisnotify.New(redisnotify.Config{Client: rdb, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return n
	})
}

// proxied is a Notifier on prefix whose connections pass through proxy.
func proxied(t *testing.T, proxy *redistest.CutProxy, prefix string) *redisnotify.Notifier {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { rdb.Close() })
	n, err := redisnotify.New(redisnotify.Config{Client: rdb, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// resumeWithin bounds how soon a subscription is made again once Redis
// answers; the client retries its connection every 100 ms.
const resumeWithin = 5 * time.Second

// TestSubscriptionTellsItResumed: a message published while a node's
// connection is cut is lost to it, and the node's subscription says when
// it is made again; messages published after reach it again.
func TestSubscriptionTellsItResumed(t *testing.T) {
	proxy := redistest.NewCutProxy(t)
	rdb, prefix := redistest.Client(t)
	pub, err := redisnotify.New(redisnotify.Config{Client: rdb, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 16)
	resumed := make(chan struct{}, 16)
	stop, err := proxied(t, proxy, prefix).SubscribeResuming(t.Context(), "t",
		func(p []byte) { got <- string(p) }, func() { resumed <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	receive := func(want string) {
		t.Helper()
		select {
		case m := <-got:
			if m != want {
				t.Fatalf("got %q, want %q", m, want)
			}
		case <-time.After(resumeWithin):
			t.Fatalf("%q not delivered within %v", want, resumeWithin)
		}
	}
	if err := pub.Publish(t.Context(), "t", []byte("before")); err != nil {
		t.Fatal(err)
	}
	receive("before")

	proxy.Cut()
	if err := pub.Publish(t.Context(), "t", []byte("lost")); err != nil {
		t.Fatal(err)
	}
	proxy.Restore()
	select {
	case <-resumed:
	case <-time.After(resumeWithin):
		t.Fatalf("the subscription did not tell it resumed within %v of Redis answering", resumeWithin)
	}
	if err := pub.Publish(t.Context(), "t", []byte("after")); err != nil {
		t.Fatal(err)
	}
	receive("after")
}

// TestSettingsResyncAfterACut: a change announced while the second node's
// connection to Redis is cut reaches it by its periodic re-sync.
func TestSettingsResyncAfterACut(t *testing.T) {
	st := openStore(t)
	proxy := redistest.NewCutProxy(t)
	rdb, prefix := redistest.Client(t)
	nodes := 0
	settingstest.RunResync(t, st, func(t *testing.T) notify.Notifier {
		nodes++
		if nodes == 1 {
			n, err := redisnotify.New(redisnotify.Config{Client: rdb, Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		return proxied(t, proxy, prefix)
	}, proxy.Cut, proxy.Restore)
}

// TestSettingsReloadWhenSubscriptionResumes: a change announced while the
// second node's connection is cut reaches it as soon as its subscription
// is made again, before any re-sync.
func TestSettingsReloadWhenSubscriptionResumes(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	proxy := redistest.NewCutProxy(t)
	rdb, prefix := redistest.Client(t)
	direct, err := redisnotify.New(redisnotify.Config{Client: rdb, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	var ms [2]*settings.Manager
	for i, n := range []notify.Notifier{direct, proxied(t, proxy, prefix)} {
		m, err := settings.Load(ctx, st, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		stop, err := m.Share(ctx, settings.ShareConfig{Notifier: n, Clock: settingstest.Timers(fakeclock.New())})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		ms[i] = m
	}
	changed := make(chan settings.Values, 4)
	ms[1].OnChange(func(_, next settings.Values) { changed <- next })
	proxy.Cut()
	if _, err := ms[0].Update(ctx, map[string]string{"pair_interval": "9s"}); err != nil {
		t.Fatal(err)
	}
	proxy.Restore()
	select {
	case v := <-changed:
		if v.PairInterval != 9*time.Second {
			t.Fatalf("the resumed node's listener saw %+v", v)
		}
	case <-time.After(resumeWithin):
		t.Fatalf("the change did not reach the cut-off node within %v of Redis answering", resumeWithin)
	}
}

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "w.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
