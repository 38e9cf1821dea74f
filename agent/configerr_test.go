package agent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/testwait"
)

// A configuration error (a wrong or rotated key, a key without rights, a
// GatewayURL that does not serve the route, an account the gateway does
// not have yet) refuses every batch alike. The batch stays in the spool and
// is retried until the configuration is fixed; then the same agent, never
// restarted, delivers everything, once.
func TestConfigErrorKeepsBatchSpooledUntilFixed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		refuse func(*gateway) // makes the gateway refuse the agent
		status int
		hint   string // what the log must tell the operator to check
	}{
		{"unauthorized", func(g *gateway) { g.setKey("rotated-key") }, 401, "APIKey"},
		{"forbidden", func(g *gateway) { g.setMode(gwForbidden) }, 403, "APIKey"},
		{"no route", func(g *gateway) { g.setMode(gwNoRoute) }, 404, "GatewayURL"},
		{"unknown account", func(g *gateway) { g.setMode(gwUnknownAccount) }, 400, "AccountID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newGateway(t)
			tc.refuse(g)
			dir := t.TempDir()
			logs := &syncWriter{w: &bytes.Buffer{}}
			a := newTestAgent(t, g, dir, func(c *Config) {
				c.Logger = slog.New(slog.NewTextHandler(logs, nil))
			})
			rs := testReceipts("cfg", 30)
			reportAll(t, a, rs)
			testwait.For(t, "three retries or a dead letter", 20*time.Second, func() bool { st := a.Stats(); return st.Retries >= 3 || st.DeadLettered > 0 })

			st := a.Stats()
			if st.DeadLettered != 0 || st.Acked != 0 || st.ConfigErrors < 3 {
				t.Fatalf("Stats = %+v while the gateway refuses: want nothing dead-lettered or acked, at least 3 config errors", st)
			}
			if _, err := os.Stat(filepath.Join(dir, deadLetterFile)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("dead-letter file: %v, want none", err)
			}
			out := logs.String()
			var line string
			for l := range strings.Lines(out) {
				if strings.Contains(l, "level=ERROR") && strings.Contains(l, "status="+strconv.Itoa(tc.status)) {
					line = l
					break
				}
			}
			if line == "" || !strings.Contains(line, tc.hint) {
				t.Errorf("no error log with status %d naming %s:\n%s", tc.status, tc.hint, out)
			}
			if strings.Contains(out, testKey) {
				t.Errorf("the API key appears in the log:\n%s", out)
			}
			g.wantStored(t, nil)

			// Fixed on the gateway's side: the same agent delivers.
			g.setKey(testKey)
			g.setMode(gwOK)
			closeAgent(t, a)
			if st := a.Stats(); st.Acked != 30 || st.DeadLettered != 0 {
				t.Errorf("Stats = %+v, want 30 acked, none dead-lettered", st)
			}
			if c := g.counts(); c.accepted != 30 || c.duplicates != 0 {
				t.Errorf("gateway accepted %d and counted %d duplicates, want 30 and 0", c.accepted, c.duplicates)
			}
			g.wantStored(t, rs)
		})
	}
}

// An agent started with a wrong key keeps what it is given; Close gives
// up when its context ends, and the next agent on the spool, started with
// the right key, delivers all of it exactly once.
func TestWrongKeyThenRestartWithRightKeyDelivers(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	dir := t.TempDir()
	logs := &syncWriter{w: &bytes.Buffer{}}
	a := newTestAgent(t, g, dir, func(c *Config) {
		c.APIKey = "wrong-key-91c2"
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	rs := testReceipts("wrongkey", 40)
	reportAll(t, a, rs)
	testwait.For(t, "two retries or a dead letter", 20*time.Second, func() bool { st := a.Stats(); return st.Retries >= 2 || st.DeadLettered > 0 })

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- a.Close(ctx) }()
	select {
	case err := <-closed:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close = %v, want it to say receipts stay in the spool (deadline exceeded)", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Close did not return after its context ended")
	}
	if st := a.Stats(); st.DeadLettered != 0 || st.Acked != 0 || st.Retries < 2 || st.ConfigErrors < 2 {
		t.Errorf("Stats = %+v, want retries and config errors counted, nothing dead-lettered or acked", st)
	}
	if _, err := os.Stat(filepath.Join(dir, deadLetterFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dead-letter file: %v, want none", err)
	}
	if strings.Contains(logs.String(), "wrong-key-91c2") {
		t.Errorf("the API key appears in the log:\n%s", logs.String())
	}

	b := newTestAgent(t, g, dir, nil)
	if st := b.Stats(); st.Replayed != 40 {
		t.Errorf("Replayed = %d, want 40", st.Replayed)
	}
	closeAgent(t, b)
	if st := b.Stats(); st.Acked != 40 || st.Accepted != 40 || st.ConfigErrors != 0 {
		t.Errorf("Stats = %+v, want 40 acked and accepted", st)
	}
	if c := g.counts(); c.accepted != 40 || c.duplicates != 0 {
		t.Errorf("gateway accepted %d and counted %d duplicates, want 40 and 0", c.accepted, c.duplicates)
	}
	g.wantStored(t, rs)
}

// The real gateway answers 400 `unknown account_id "…"` to an agent
// started before its account exists; once the account is created the
// agent delivers what it spooled meanwhile.
func TestUnknownAccountIsDeliveredOnceCreated(t *testing.T) {
	t.Parallel()
	const later = "acct-later"
	g := newRealGateway(t)
	logs := &syncWriter{w: &bytes.Buffer{}}
	a, err := New(Config{GatewayURL: g.url, APIKey: testKey, AccountID: later, SpoolDir: t.TempDir(),
		BackoffBase: time.Millisecond, BackoffCap: 10 * time.Millisecond, RequestTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Close(ctx)
	})
	rs := testReceipts("later", 6)
	reportAll(t, a, rs)
	testwait.For(t, "two retries or a dead letter", 20*time.Second, func() bool { st := a.Stats(); return st.Retries >= 2 || st.DeadLettered > 0 })
	if st := a.Stats(); st.DeadLettered != 0 || st.ConfigErrors < 2 {
		t.Fatalf("Stats = %+v, want config errors and nothing dead-lettered", st)
	}
	if !strings.Contains(logs.String(), `unknown account_id`) {
		t.Errorf("the log does not relay the gateway's message:\n%s", logs.String())
	}

	ctx := context.Background()
	if _, err := g.store.CreateAccount(ctx, wamux.Account{ID: later, PhoneNumberID: "106540352242923", AccessToken: "EAAGtoken",
		BaseURL: wamux.DefaultBaseURL, RatePerSec: 80, Burst: 80, State: wamux.AccountActive}); err != nil {
		t.Fatal(err)
	}
	closeAgent(t, a)
	if st := a.Stats(); st.Acked != 6 || st.Accepted != 6 || st.DeadLettered != 0 {
		t.Errorf("Stats = %+v, want 6 acked and accepted", st)
	}
	if err := g.pipe.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		got, err := g.store.ListReceipts(ctx, later, r.MessageID)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, s := range got {
			found = found || s.Type == r.Type
		}
		if !found {
			t.Errorf("receipt %s %s not stored for %s", r.MessageID, r.Type, later)
		}
	}
}

// Configuration errors are retried on the usual backoff schedule, capped
// at BackoffCap, however long they last.
func TestConfigErrorBackoffIsCapped(t *testing.T) {
	t.Parallel()
	const refusals = 12
	const base, limit = 10 * time.Millisecond, 40 * time.Millisecond
	script := make([]gwMode, refusals)
	for i := range script {
		script[i] = []gwMode{gwForbidden, gwNoRoute, gwUnknownAccount}[i%3]
	}
	a, _ := scriptedBackoff(t, "cfgbackoff", script, base, limit)
	if st := a.Stats(); st.Retries != refusals || st.ConfigErrors != refusals || st.DeadLettered != 0 {
		t.Errorf("Stats = %+v, want %d retries and config errors, nothing dead-lettered", st, refusals)
	}
}
