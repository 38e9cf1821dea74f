package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/store"
)

func TestRepeatsAreDroppedLocally(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	a := newTestAgent(t, g, t.TempDir(), nil)
	rs := testReceipts("rep", 100)

	// Three reporters race over the same receipts: each receipt is spooled
	// once and the other two Reports are dropped.
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for _, r := range rs {
				if err := a.Report(context.Background(), r); err != nil {
					t.Errorf("Report: %v", err)
				}
			}
		})
	}
	wg.Wait()
	// A repeat that differs only in event time or version is still a repeat.
	again := rs[7]
	again.EventTime = again.EventTime.Add(time.Hour)
	again.Version = 2 - again.Version // rs[7] is a delivered with version 2: now omitted
	reportAll(t, a, []Receipt{again})
	closeAgent(t, a)

	st := a.Stats()
	if st.Reported != 100 || st.DroppedRepeats != 201 || st.Acked != 100 || st.Accepted != 100 {
		t.Errorf("Stats = %+v, want 100 reported, 201 dropped, 100 acked and accepted", st)
	}
	c := g.counts()
	for _, r := range rs {
		k := store.ReceiptKey{MessageID: r.MessageID, AccountID: testAccount, Type: r.Type}
		if c.seen[k] != 1 {
			t.Errorf("gateway saw %v %d times, want once", k, c.seen[k])
		}
	}
	if c.duplicates != 0 {
		t.Errorf("gateway counted %d duplicates, want 0", c.duplicates)
	}
	g.wantStored(t, rs)
}

func TestRepeatsSurviveRestartWhileUnacked(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	g.setMode(gwFail)
	dir := t.TempDir()
	rs := testReceipts("restart", 10)
	a := newTestAgent(t, g, dir, nil)
	reportAll(t, a, rs)
	closeCanceled(t, a)

	g.setMode(gwOK)
	b := newTestAgent(t, g, dir, nil)
	reportAll(t, b, rs) // still in the spool: repeats
	closeAgent(t, b)
	if st := b.Stats(); st.Replayed != 10 || st.DroppedRepeats != 10 || st.Acked != 10 {
		t.Errorf("Stats = %+v, want 10 replayed, 10 dropped, 10 acked", st)
	}
	g.wantStored(t, rs)
}

func TestRetriesUntilAcked(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	g.setMode(gwOK, gwFail, gwFail, gwFail, gwLoseAck, gwFail)
	a := newTestAgent(t, g, t.TempDir(), func(c *Config) { c.FlushEvents = 20 })
	rs := testReceipts("retry", 120)
	reportAll(t, a, rs)
	closeAgent(t, a)

	st := a.Stats()
	if st.Retries < 5 || st.Acked != 120 {
		t.Errorf("Stats = %+v, want at least 5 retries and 120 acked", st)
	}
	if st.Duplicates == 0 {
		t.Errorf("Stats = %+v: the batch whose ack was lost should come back as duplicates", st)
	}
	g.wantStored(t, rs)
}

func TestHangingGatewayIsRetried(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	g.setMode(gwOK, gwHang)
	a := newTestAgent(t, g, t.TempDir(), func(c *Config) { c.RequestTimeout = 500 * time.Millisecond })
	rs := testReceipts("hang", 10)
	reportAll(t, a, rs)
	closeAgent(t, a)
	// A slow answer under the race detector may cost more than the one
	// hung attempt; then the store already has the batch and says so.
	if st := a.Stats(); st.Retries < 1 || st.Acked != 10 || st.Accepted+st.Duplicates != 10 {
		t.Errorf("Stats = %+v, want at least 1 retry and 10 acked", st)
	}
	g.wantStored(t, rs)
}

func TestRejectedBatchGoesToDeadLetterFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		key    string
		mode   gwMode
		status int
		code   string
	}{
		// A 400 that names no receipt and no unknown account, and any
		// other 4xx that is not a configuration error (401, 403, 404: see
		// TestConfigErrorKeepsBatchSpooledUntilFixed), is bad input that
		// retrying cannot fix.
		{"invalid", testKey, gwReject, 400, wamux.EInvalid},
		{"conflict", testKey, gwConflict, 409, wamux.EConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newGateway(t)
			g.setMode(tc.mode)
			dir := t.TempDir()
			logs := &syncWriter{w: &bytes.Buffer{}}
			a := newTestAgent(t, g, dir, func(c *Config) {
				c.APIKey = tc.key
				c.Logger = slog.New(slog.NewTextHandler(logs, nil))
			})
			rs := testReceipts("dead", 5)
			reportAll(t, a, rs)
			closeAgent(t, a)

			// Each refusal concerns the whole batch (no receipt named).
			if c := g.counts(); c.requests != 1 {
				t.Errorf("gateway got %d requests, want 1: a rejected batch is not retried", c.requests)
			}
			if st := a.Stats(); st.DeadLettered != 5 || st.Retries != 0 || st.Acked != 0 {
				t.Errorf("Stats = %+v, want 5 dead-lettered, no retries", st)
			}
			dls := readDeadLetters(t, dir)
			var dead []record
			for _, d := range dls {
				if d.Status != tc.status || d.Code != tc.code || d.AccountID != testAccount {
					t.Fatalf("dead letter = %+v, want status %d, code %s", d, tc.status, tc.code)
				}
				dead = append(dead, d.Receipts...)
			}
			if len(dls) != 1 || len(dead) != 5 {
				t.Fatalf("dead letters = %+v, want one line holding 5 receipts", dls)
			}
			for i, r := range dead {
				if r.MessageID != rs[i].MessageID || r.Type != string(rs[i].Type) {
					t.Errorf("dead letter receipt %d = %+v, want %+v", i, r, rs[i])
				}
			}
			if strings.Contains(logs.String(), tc.key) {
				t.Errorf("the API key appears in the log:\n%s", logs.String())
			}
			g.wantStored(t, nil)

			// The rejected batch is not sent again by the next agent.
			g.setMode(gwOK)
			b := newTestAgent(t, g, dir, nil)
			closeAgent(t, b)
			if st := b.Stats(); st.Replayed != 0 || st.Sent != 0 {
				t.Errorf("next agent Stats = %+v, want nothing replayed", st)
			}
		})
	}
}

func TestCloseLeavesUnackedInSpool(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	g.setMode(gwFail)
	dir := t.TempDir()
	a := newTestAgent(t, g, dir, nil)
	rs := testReceipts("left", 20)
	reportAll(t, a, rs)
	closeCanceled(t, a)
	if err := a.Report(context.Background(), testReceipts("late", 1)[0]); !errors.Is(err, ErrClosed) {
		t.Errorf("Report after Close = %v, want ErrClosed", err)
	}

	g.setMode(gwOK)
	b := newTestAgent(t, g, dir, nil)
	if st := b.Stats(); st.Replayed != 20 {
		t.Errorf("Replayed = %d, want 20", st.Replayed)
	}
	more := testReceipts("more", 6)
	reportAll(t, b, more)
	closeAgent(t, b)
	g.wantStored(t, append(rs, more...))
}

func TestSecondAgentOnSameSpoolIsRefused(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	dir := t.TempDir()
	newTestAgent(t, g, dir, nil)
	_, err := New(Config{GatewayURL: g.srv.URL, APIKey: testKey, AccountID: testAccount, SpoolDir: dir})
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second New on the same spool = %v, want an in-use error", err)
	}
}

func TestAPIKeyStaysOutOfLogsAndErrors(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-api-key"
	logs := &syncWriter{w: &bytes.Buffer{}}
	// Nothing listens here (a closed test server), so every attempt fails
	// with a network error that gets logged.
	g := newGateway(t)
	url := g.srv.URL
	g.srv.Close()
	a, err := New(Config{GatewayURL: url, APIKey: secret, AccountID: testAccount, SpoolDir: t.TempDir(),
		BackoffBase: time.Millisecond, BackoffCap: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	reportAll(t, a, testReceipts("secret", 3))
	testwait.For(t, "three retries", 20*time.Second, func() bool { return a.Stats().Retries >= 3 })
	err = a.Close(canceledContext())
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("Close = %v, want an error without the key", err)
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the API key appears in the log:\n%s", logs.String())
	}
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	ok := Config{GatewayURL: "http://127.0.0.1:1", APIKey: "k", AccountID: "a", SpoolDir: t.TempDir()}
	for name, change := range map[string]func(*Config){
		"no url":          func(c *Config) { c.GatewayURL = "" },
		"relative url":    func(c *Config) { c.GatewayURL = "/v1" },
		"ftp url":         func(c *Config) { c.GatewayURL = "ftp://host" },
		"url with user":   func(c *Config) { c.GatewayURL = "http://user:pw@host" },
		"url with query":  func(c *Config) { c.GatewayURL = "http://host/?key=x" },
		"url with bare ?": func(c *Config) { c.GatewayURL = "http://host/?" },
		"url with bare #": func(c *Config) { c.GatewayURL = "http://host/#" },
		"no key":          func(c *Config) { c.APIKey = "" },
		"key with space":  func(c *Config) { c.APIKey = "a b" },
		"key with CRLF":   func(c *Config) { c.APIKey = "a\r\nX-Evil: 1" },
		"no account":      func(c *Config) { c.AccountID = "" },
		// Ids the gateway gives no account: every batch would be refused
		// and dead-lettered.
		"account with space":     func(c *Config) { c.AccountID = "acme 1" },
		"account too long":       func(c *Config) { c.AccountID = strings.Repeat("a", 65) },
		"account with slash":     func(c *Config) { c.AccountID = "acme/1" },
		"account with dot first": func(c *Config) { c.AccountID = ".acme" },
		"no spool":               func(c *Config) { c.SpoolDir = "" },
		"negative flush":         func(c *Config) { c.FlushInterval = -1 },
		"negative lru":           func(c *Config) { c.LRUSize = -1 },
		"batch too large":        func(c *Config) { c.MaxBatch = MaxBatchLimit + 1 },
		"events > batch":         func(c *Config) { c.FlushEvents, c.MaxBatch = 100, 10 },
		"cap below base":         func(c *Config) { c.BackoffBase, c.BackoffCap = time.Second, time.Millisecond },
	} {
		cfg := ok
		change(&cfg)
		if _, err := New(cfg); wamux.ErrorCode(err) != wamux.EInvalid {
			t.Errorf("%s: New = %v, want an invalid error", name, err)
		}
	}
	cfg, err := ok.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.FlushInterval != 200*time.Millisecond || cfg.FlushEvents != 50 || cfg.LRUSize != 5000 {
		t.Errorf("defaults = %+v", cfg)
	}
}

func TestReportValidatesReceipt(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	a := newTestAgent(t, g, t.TempDir(), nil)
	good := testReceipts("valid", 1)[0]
	for name, change := range map[string]func(*Receipt){
		"no id":            func(r *Receipt) { r.MessageID = "" },
		"long id":          func(r *Receipt) { r.MessageID = strings.Repeat("x", MaxMessageIDLen+1) },
		"bad type":         func(r *Receipt) { r.Type = "seen" },
		"no time":          func(r *Receipt) { r.EventTime = time.Time{} },
		"negative version": func(r *Receipt) { r.Version = -1 },
		"version not type": func(r *Receipt) { r.Type, r.Version = wamux.ReceiptRead, 2 },
	} {
		r := good
		change(&r)
		if err := a.Report(context.Background(), r); wamux.ErrorCode(err) != wamux.EInvalid {
			t.Errorf("%s: Report = %v, want an invalid error", name, err)
		}
	}
	closeAgent(t, a)
	if st := a.Stats(); st.Reported != 0 || st.Sent != 0 {
		t.Errorf("Stats = %+v, want nothing reported", st)
	}
}

func TestAckedSegmentsAreDeleted(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	dir := t.TempDir()
	// Tiny segments: many rotations and deletions, and batches that span
	// segments.
	a := newTestAgent(t, g, dir, func(c *Config) { c.SegmentBytes = 700; c.MaxBatch = 7; c.FlushEvents = 7 })
	rs := testReceipts("seg", 200)
	reportAll(t, a, rs)
	closeAgent(t, a)
	g.wantStored(t, rs)
	if segs, _ := filepath.Glob(filepath.Join(dir, "*.seg")); len(segs) != 0 {
		t.Errorf("spool still holds %d segments after everything was acked", len(segs))
	}
}

// closeCanceled closes a without waiting for delivery, as a process that
// must stop now would, and expects the error that says receipts were left.
func closeCanceled(t *testing.T, a *Agent) {
	t.Helper()
	if err := a.Close(canceledContext()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close with a canceled context = %v, want context.Canceled", err)
	}
}

func canceledContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func readDeadLetters(t *testing.T, dir string) []deadLetter {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, deadLetterFile))
	if err != nil {
		t.Fatalf("open dead letters: %v", err)
	}
	defer f.Close()
	var out []deadLetter
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var d deadLetter
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("dead letter line %q: %v", sc.Text(), err)
		}
		out = append(out, d)
	}
	return out
}

// syncWriter lets a log handler and the test share a buffer.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

// Close with a context that has already ended still tells the truth: when
// everything was acknowledged, nothing stays in the spool and Close says
// nothing is left (the sender looks before it stops on the context).
func TestCloseCanceledAfterEverythingAckedIsClean(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	for i := range 20 {
		dir := t.TempDir()
		// FlushEvents 3: the three receipts go out at once instead of
		// after the flush interval.
		a := newTestAgent(t, g, dir, func(c *Config) { c.FlushEvents = 3 })
		if i%2 == 1 {
			rs := testReceipts("acked"+strconv.Itoa(i), 3)
			reportAll(t, a, rs)
			testwait.For(t, "three receipts acknowledged", 20*time.Second, func() bool { return a.Stats().Acked == 3 })
		}
		if err := a.Close(canceledContext()); err != nil {
			t.Fatalf("agent %d: Close with a canceled context after everything was acked = %v, want nil", i, err)
		}
	}
}
