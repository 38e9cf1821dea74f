package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/sqlite"
)

// realGateway is the production POST /v1/receipts:batch handler (httpapi
// with the real receipt pipeline on SQLite) with testAccount configured.
type realGateway struct {
	url   string
	store *sqlite.Store
	pipe  *receipts.Pipeline
}

func newRealGateway(t *testing.T) *realGateway {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "wamux.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.CreateAccount(ctx, wamux.Account{ID: testAccount, PhoneNumberID: "106540352242922", AccessToken: "EAAGtoken",
		BaseURL: wamux.DefaultBaseURL, RatePerSec: 80, Burst: 80, State: wamux.AccountActive}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	pipe, err := receipts.New(receipts.Config{Store: st, Registry: reg, BatchWait: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := pipe.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pipe.Stop(context.Background()) })
	api, err := httpapi.New(httpapi.Config{Store: st, Registry: reg, APIKeys: []string{testKey},
		Logger: slog.New(slog.DiscardHandler), Receipts: pipe})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &realGateway{url: srv.URL, store: st, pipe: pipe}
}

// stored reports whether the gateway's store holds r.
func (g *realGateway) stored(t *testing.T, r Receipt) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := g.pipe.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	rs, err := g.store.ListReceipts(ctx, testAccount, r.MessageID)
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range rs {
		if got.Type == r.Type {
			return true
		}
	}
	return false
}

func newAgentAt(t *testing.T, url, dir string) *Agent {
	t.Helper()
	a, err := New(Config{GatewayURL: url, APIKey: testKey, AccountID: testAccount, SpoolDir: dir,
		BackoffBase: time.Millisecond, BackoffCap: 10 * time.Millisecond, RequestTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Close(ctx)
	})
	return a
}

// A receipt the real gateway would reject (400) must not take the good
// receipts of its batch into the dead-letter file: Report refuses what the
// gateway refuses, and a 400 dead-letters only the receipts it concerns.
func TestPoisonReceiptDoesNotDeadLetterGoodOnes(t *testing.T) {
	for name, poison := range map[string]func(*Receipt){
		"blank message id":    func(r *Receipt) { r.MessageID = "   " },
		"event time > 9999":   func(r *Receipt) { r.EventTime = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		"event time under 1s": func(r *Receipt) { r.EventTime = time.UnixMilli(500) },
		"event time ahead":    func(r *Receipt) { r.EventTime = time.Now().Add(time.Hour) },
	} {
		t.Run(name, func(t *testing.T) {
			g := newRealGateway(t)
			a := newAgentAt(t, g.url, t.TempDir())
			rs := testReceipts("poison", 10)
			bad := Receipt{MessageID: "wamid.poison", Type: wamux.ReceiptRead, EventTime: time.UnixMilli(1_764_000_000_000)}
			poison(&bad)
			reportAll(t, a, rs[:5])
			if err := a.Report(context.Background(), bad); err != nil && wamux.ErrorCode(err) != wamux.EInvalid {
				t.Fatalf("Report(poison) = %v, want nil or an invalid error", err)
			}
			reportAll(t, a, rs[5:])
			closeAgent(t, a)
			if st := a.Stats(); st.DeadLettered > 1 {
				t.Errorf("Stats = %+v: %d good receipts were dead-lettered with the poison one", st, st.DeadLettered-1)
			}
			for _, r := range rs {
				if !g.stored(t, r) {
					t.Errorf("good receipt %s %s never reached the gateway", r.MessageID, r.Type)
					break
				}
			}
		})
	}
}

// A 400 that names one receipt (here: the gateway refuses two ids) must
// dead-letter those receipts alone, not the whole batch, and cost a few
// requests per refused receipt, not one per receipt.
func TestOneRejectedReceiptDeadLettersOnlyItself(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	g.poisonID = "wamid.refused"
	dir := t.TempDir()
	a := newTestAgent(t, g, dir, func(c *Config) { c.FlushInterval = time.Hour })
	rs := testReceipts("one-bad", 20)
	refused := []Receipt{{MessageID: "wamid.refused", Type: wamux.ReceiptRead, EventTime: time.UnixMilli(1_764_000_000_000)},
		{MessageID: "wamid.refused", Type: wamux.ReceiptSent, EventTime: time.UnixMilli(1_764_000_000_000)}}
	reportAll(t, a, rs[:10])
	reportAll(t, a, refused[:1])
	reportAll(t, a, rs[10:15])
	reportAll(t, a, refused[1:])
	reportAll(t, a, rs[15:])
	closeAgent(t, a)
	if st := a.Stats(); st.DeadLettered != 2 || st.Acked != 20 {
		t.Errorf("Stats = %+v, want 2 dead-lettered and 20 acked", st)
	}
	g.wantStored(t, rs)
	// The batch, then per refused receipt: the ones before it, it, the rest.
	if c := g.counts(); c.requests > 7 {
		t.Errorf("%d requests for a batch of 22 with 2 refused, want at most 7", c.requests)
	}
	dead := 0
	for _, d := range readDeadLetters(t, dir) {
		for _, r := range d.Receipts {
			if r.MessageID != "wamid.refused" {
				t.Errorf("dead-lettered %s, a good receipt", r.MessageID)
			}
			dead++
		}
	}
	if dead != 2 {
		t.Errorf("%d receipts dead-lettered, want the 2 refused", dead)
	}
}

// A dead-lettered receipt was never delivered, so the same receipt
// reported again (after the cause was fixed on the gateway) is no repeat:
// it is spooled and delivered.
func TestRepeatOfDeadLetteredIsDelivered(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	g.setMode(gwReject)
	a := newTestAgent(t, g, t.TempDir(), func(c *Config) { c.FlushEvents = 4 }) // sent at once, not after the interval
	rs := testReceipts("dl-repeat", 4)
	reportAll(t, a, rs)
	testwait.For(t, "four dead letters", 20*time.Second, func() bool { return a.Stats().DeadLettered == 4 })
	g.setMode(gwOK) // e.g. the gateway was fixed to take such input
	reportAll(t, a, rs)
	closeAgent(t, a)
	if st := a.Stats(); st.DroppedRepeats != 0 {
		t.Errorf("Stats = %+v: re-reports of dead-lettered receipts were dropped as repeats", st)
	}
	g.wantStored(t, rs)
}

// A 2xx that is not the gateway's answer (a proxy, a wrong GatewayURL
// pointing at a web server that answers every POST with 200) is no ack:
// the receipts stay in the spool and are retried.
func TestUnreadable2xxIsNotAnAck(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>welcome</html>"))
	}))
	defer srv.Close()
	dir := t.TempDir()
	a := newAgentAt(t, srv.URL, dir)
	reportAll(t, a, testReceipts("html", 5))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_ = a.Close(ctx)
	if st := a.Stats(); st.Acked != 0 {
		t.Errorf("Stats = %+v: %d receipts counted as acked by a 200 text/html page", st, st.Acked)
	}
	// A new agent on the spool must still have them.
	g := newGateway(t)
	b := newTestAgent(t, g, dir, nil)
	if st := b.Stats(); st.Replayed != 5 {
		t.Errorf("Replayed = %d, want 5: the receipts were dropped from the spool", st.Replayed)
	}
}

// A Report whose ctx ends while its record is being fsynced returns an
// error, but the record becomes durable and is sent anyway; the count of
// unsent records must include it, or it drifts below the truth and
// FlushEvents new receipts do not start a send (they wait for
// FlushInterval).
func TestFlushEventsAfterCanceledReports(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	a := newTestAgent(t, g, t.TempDir(), func(c *Config) { c.FlushInterval = time.Hour; c.FlushEvents = 5 })
	// Callers with a ctx that ends early (here: already ended).
	for _, r := range testReceipts("canceled", 200) {
		_ = a.Report(canceledContext(), r)
	}
	var good []Receipt // Report returned nil
	unsent := func() int {
		seen := g.counts().seen
		n := 0
		for _, r := range good {
			if seen[store.ReceiptKey{MessageID: r.MessageID, AccountID: testAccount, Type: r.Type}] == 0 {
				n++
			}
		}
		return n
	}
	for i := range 3 {
		rs := testReceipts(fmt.Sprint("events", i), 5) // FlushEvents receipts: a send starts now
		reportAll(t, a, rs)
		good = append(good, rs...)
		// Fewer than FlushEvents may wait for the interval; not more.
		testwait.ForNil(t, 3*time.Second, func() error {
			if n := unsent(); n >= 5 {
				return fmt.Errorf("round %d: %d durable receipts (>= FlushEvents) unsent (FlushInterval is 1h); unflushed = %d",
					i, n, a.unflushed.Load())
			}
			return nil
		})
	}
}

// A message id of invalid UTF-8 would be spooled as JSON (each bad byte
// becomes the three-byte U+FFFD) and read back changed, possibly longer
// than MaxMessageIDLen, which made the reader drop the rest of the
// segment: every receipt reported after it was lost. Report refuses it
// (ReportBatch refuses the whole call, as for any invalid receipt), and
// the receipts reported after it are delivered.
func TestInvalidUTF8IDLosesNothingElse(t *testing.T) {
	t.Parallel()
	bad := Receipt{MessageID: strings.Repeat("\xff", 400), Type: wamux.ReceiptRead, EventTime: time.UnixMilli(1_764_000_000_000)}
	rs := testReceipts("after-utf8", 20)
	g := newGateway(t)
	a := newTestAgent(t, g, t.TempDir(), func(c *Config) { c.FlushInterval = time.Hour })
	if err := a.Report(context.Background(), bad); wamux.ErrorCode(err) != wamux.EInvalid {
		t.Fatalf("Report of an id of invalid UTF-8: %v, want invalid", err)
	}
	// The gateway refuses a NUL byte too (PostgreSQL text cannot hold it).
	nul := bad
	nul.MessageID = "wamid.a\x00b"
	if err := a.Report(context.Background(), nul); wamux.ErrorCode(err) != wamux.EInvalid {
		t.Fatalf("Report of an id with a NUL byte: %v, want invalid", err)
	}
	if err := a.ReportBatch(context.Background(), append([]Receipt{bad}, rs...)); wamux.ErrorCode(err) != wamux.EInvalid {
		t.Fatalf("ReportBatch with an id of invalid UTF-8: %v, want invalid", err)
	}
	reportAll(t, a, rs)
	closeAgent(t, a)
	seen := g.counts().seen
	for _, r := range rs {
		if seen[store.ReceiptKey{MessageID: r.MessageID, AccountID: testAccount, Type: r.Type}] == 0 {
			t.Fatalf("%s, reported after the bad one, never reached the gateway; Stats = %+v", r.MessageID, a.Stats())
		}
	}
}

// A whole record (length and CRC intact) whose content does not decode is
// not a torn tail: the records after it were fsynced and survive a
// restart; only it is skipped.
func TestSpoolSkipsOnlyTheUnreadableRecord(t *testing.T) {
	t.Parallel()
	recs := spoolRecords(5)
	bad := recs[2]
	bad.MessageID = strings.Repeat("\xff", 400) // reads back as 1,200 bytes: over MaxMessageIDLen
	var data []byte
	for i, r := range recs {
		if i == 2 {
			r = bad
		}
		var err error
		if data, err = appendRecord(data, r); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "00000000000000000001.seg"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	want := []record{recs[0], recs[1], recs[3], recs[4]}
	s, visited := openTestSpool(t, dir)
	defer s.close()
	if !slices.Equal(visited, want) {
		t.Errorf("recovered seqs %v, want 1, 2, 4, 5", seqs(visited))
	}
	got, _, err := s.read(cursor{}, 100)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("read seqs %v (%v), want 1, 2, 4, 5", seqs(got), err)
	}
}

func seqs(rs []record) []uint64 {
	out := make([]uint64, len(rs))
	for i, r := range rs {
		out[i] = r.Seq
	}
	return out
}

// The real gateway names the receipt it refuses in the form
// rejectedReceipt reads, whether its handler refused it or the pipeline
// did: the narrowing of a rejected batch depends on it.
func TestRealGatewayNamesTheRefusedReceipt(t *testing.T) {
	t.Parallel()
	g := newRealGateway(t)
	a := newAgentAt(t, g.url, t.TempDir())
	for name, spoil := range map[string]func(*record){
		"handler (blank id is trimmed to nothing)": func(r *record) { r.MessageID = "   " },
		"pipeline (event time under a second)":     func(r *record) { r.EventTime = 500 },
	} {
		recs := spoolRecords(4)
		spoil(&recs[2])
		at := a.post(context.Background(), recs)
		if i, ok := rejectedReceipt(at, len(recs)); !ok || i != 2 {
			t.Errorf("%s: status %d, message %q: rejectedReceipt = %d, %v; want 2", name, at.status, at.message, i, ok)
		}
	}
}
