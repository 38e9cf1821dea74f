package receipts_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/sqlite"
)

// waitState polls the store (with a deadline) until the state of k is
// there, and fails otherwise.
func waitState(t *testing.T, st store.Store, k store.StateKey, d time.Duration) {
	t.Helper()
	testwait.ForNil(t, d, func() error {
		got, err := st.GetStates(context.Background(), []store.StateKey{k})
		if err != nil {
			return err
		}
		if _, ok := got[k]; ok {
			return nil
		}
		logged, _ := st.ListReceiptLog(context.Background(), 0, 10)
		return fmt.Errorf("state of %v never merged; the log still holds %d receipts: %+v", k, len(logged), logged)
	})
}

// TestReloadKeepsBacklogBelowAFailedBatch: a read-back page holds a
// receipt left by the last run (merged "again", whatever the dedup layers
// say) below a receipt of this run. reload processes this run's receipts
// first; when their batch fails past the retries, it marks the partition
// to read back from that batch's lowest id, above the backlog receipt,
// and the backlog receipt must still be read back and merged in this run.
func TestReloadKeepsBacklogBelowAFailedBatch(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	set := pausedSettings(t, st)
	old := rcpt("acc1", "w-old", wamux.ReceiptDelivered, 1)
	if _, err := st.AppendReceiptLog(ctx, []wamux.Receipt{old}); err != nil {
		t.Fatal(err)
	}
	f := &flakyStore{Store: st}
	p := startPipeline(t, receipts.Config{Store: f, Settings: set,
		Retry: receipts.RetryConfig{Attempts: 2, Base: time.Millisecond, Max: 2 * time.Millisecond}})
	fresh := rcpt("acc1", "w-new", wamux.ReceiptRead, 2)
	ingest(t, p, fresh)
	f.putFailures.Store(2) // the first batch merged fails past the retries
	if _, err := set.Update(ctx, map[string]string{"apply_state": "true"}); err != nil {
		t.Fatal(err)
	}
	flush(t, p)
	waitState(t, st, store.StateKey{AccountID: "acc1", MessageID: "w-new"}, 5*time.Second)
	waitState(t, st, store.StateKey{AccountID: "acc1", MessageID: "w-old"}, 3*time.Second)
}

// TestCorruptEntryDoesNotBlockStart: an entry of the log that does not
// decode (a torn or hand-edited row) used to fail every ListReceiptLog
// that reached it, and recover and Start with it, at every restart. It is
// dead-lettered and removed, and the good entry after it is processed.
func TestCorruptEntryDoesNotBlockStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wamux.db")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO receipt_log_entries (receipts, data) VALUES (1, x'01ff')`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	st2, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	good := rcpt("acc1", "w1", wamux.ReceiptDelivered, 1)
	if _, err := st2.AppendReceiptLog(ctx, []wamux.Receipt{good}); err != nil {
		t.Fatal(err)
	}
	p, err := receipts.New(receipts.Config{Store: st2, Registry: prometheus.NewRegistry(),
		Retry: receipts.RetryConfig{Attempts: 2, Base: time.Millisecond, Max: 2 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatalf("start with one corrupt entry in the log: %v", err)
	}
	t.Cleanup(func() { _ = p.Stop(ctx) })
	checkStates(t, st2, expected([]wamux.Receipt{good}))
	if dead, err := st2.ListDeadLetters(ctx, 10); err != nil || len(dead) != 1 {
		t.Fatalf("dead letters = %+v (%v), want the corrupt entry", dead, err)
	}
}

// TestCorruptEntryDoesNotBlockReadBack: the same corrupt entry met by a
// partition reading spilled receipts back used to fail every read, the
// partition retrying from the same id forever; the receipts spilled after
// it must be merged.
func TestCorruptEntryDoesNotBlockReadBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wamux.db")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	set := pausedSettings(t, st)
	p := startPipeline(t, receipts.Config{Store: st, Settings: set,
		Retry: receipts.RetryConfig{Attempts: 2, Base: time.Millisecond, Max: 2 * time.Millisecond}})
	// A corrupt row, written by another connection while the pipeline runs.
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO receipt_log_entries (receipts, data) VALUES (1, x'01ff')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	good := rcpt("acc1", "w1", wamux.ReceiptDelivered, 1)
	ingest(t, p, good)
	if _, err := set.Update(ctx, map[string]string{"apply_state": "true"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, store.StateKey{AccountID: "acc1", MessageID: "w1"}, 3*time.Second)
}

// gatedAppend holds AppendReceiptLog after the real append committed
// (as SQLite's deferred fsync does: the entry is visible before the
// append returns) until release is closed.
type gatedAppend struct {
	store.Store
	committed chan struct{}
	once      sync.Once
	release   chan struct{}
}

func (g *gatedAppend) AppendReceiptLog(ctx context.Context, rs []wamux.Receipt) ([]int64, error) {
	ids, err := g.Store.AppendReceiptLog(ctx, rs)
	g.once.Do(func() { close(g.committed) })
	<-g.release
	return ids, err
}

// TestPausedStartFirstAppendReadBackEarly: after a Start with apply_state
// off, a partition reading the log back may find the first append's entry
// (committed, visible) before the append returns (SQLite answers it after
// the fsync). It must count as this run's, not as backlog: otherwise
// Processed never catches up with Appended and Flush never returns.
func TestPausedStartFirstAppendReadBackEarly(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	set := pausedSettings(t, st)
	g := &gatedAppend{Store: st, committed: make(chan struct{}), release: make(chan struct{})}
	p := startPipeline(t, receipts.Config{Store: g, Settings: set})
	r := rcpt("acc1", "w1", wamux.ReceiptDelivered, 1)
	done := make(chan error, 1)
	go func() { _, err := p.Ingest(ctx, "agent", []wamux.Receipt{r}); done <- err }()
	<-g.committed
	if _, err := set.Update(ctx, map[string]string{"apply_state": "true"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, st, store.StateKey{AccountID: "acc1", MessageID: "w1"}, 3*time.Second)
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := p.Flush(fctx); err != nil {
		t.Fatalf("flush: %v (stats %+v)", err, p.Stats())
	}
}

// TestRecoverDeadLettersPoison: a receipt the store refuses as invalid is
// dead-lettered at run time (TestFailures); one left in the log by the last
// run is dead-lettered by recover too, instead of failing every Start.
func TestRecoverDeadLettersPoison(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	rs := []wamux.Receipt{rcpt("acc1", "w1", wamux.ReceiptSent, 1), rcpt("acc1", "poison", wamux.ReceiptRead, 3)}
	if _, err := st.AppendReceiptLog(ctx, rs); err != nil {
		t.Fatal(err)
	}
	f := &flakyStore{Store: st}
	p, err := receipts.New(receipts.Config{Store: f, Registry: prometheus.NewRegistry(),
		Retry: receipts.RetryConfig{Attempts: 2, Base: time.Millisecond, Max: 2 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatalf("start with a poison receipt in the log: %v", err)
	}
	t.Cleanup(func() { _ = p.Stop(ctx) })
	checkStates(t, st, expected(rs[:1]))
}

// TestNULReceiptOnPostgres: Normalize let a NUL byte through (JSON's
// "\u0000" in a message_id of /v1/receipts:batch), the log carries it
// (bytea), but PostgreSQL text refuses it with SQLSTATE 22021; taken for
// an infrastructure failure, the batch was retried and read back forever,
// and the other receipts of its partition waited behind it. Ingest
// refuses it, or the pipeline gets past it.
func TestNULReceiptOnPostgres(t *testing.T) {
	for _, b := range backends() {
		if b.name != "postgres" {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			p := startPipeline(t, receipts.Config{Store: st,
				Retry: receipts.RetryConfig{Attempts: 2, Base: time.Millisecond, Max: 2 * time.Millisecond}})
			good := rcpt("acc1", "w1", wamux.ReceiptDelivered, 1)
			if _, err := p.Ingest(context.Background(), "agent", []wamux.Receipt{good, rcpt("acc1", "w\x00x", wamux.ReceiptRead, 2)}); err != nil {
				if wamux.ErrorCode(err) != wamux.EInvalid {
					t.Fatalf("ingest: %v, want accepted or invalid", err)
				}
				ingest(t, p, good)
			}
			waitState(t, st, store.StateKey{AccountID: "acc1", MessageID: "w1"}, 5*time.Second)
		})
	}
}

// TestNULReceiptInLogOnPostgres: one such receipt already in the log (an
// earlier version accepted it) is dead-lettered, not retried forever.
func TestNULReceiptInLogOnPostgres(t *testing.T) {
	for _, b := range backends() {
		if b.name != "postgres" {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			ctx := context.Background()
			good := rcpt("acc1", "w1", wamux.ReceiptDelivered, 1)
			if _, err := st.AppendReceiptLog(ctx, []wamux.Receipt{good, rcpt("acc1", "w\x00x", wamux.ReceiptRead, 2)}); err != nil {
				t.Fatal(err)
			}
			startPipeline(t, receipts.Config{Store: st,
				Retry: receipts.RetryConfig{Attempts: 2, Base: time.Millisecond, Max: 2 * time.Millisecond}})
			waitState(t, st, store.StateKey{AccountID: "acc1", MessageID: "w1"}, 5*time.Second)
			dead, err := st.ListDeadLetters(ctx, 10)
			if err != nil || len(dead) != 1 {
				t.Fatalf("dead letters = %+v (%v), want the NUL receipt", dead, err)
			}
		})
	}
}

// pausedSettings loads st's settings with apply_state off.
func pausedSettings(t *testing.T, st store.Store) *settings.Manager {
	t.Helper()
	ctx := context.Background()
	set, err := settings.Load(ctx, st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.Update(ctx, map[string]string{"apply_state": "false"}); err != nil {
		t.Fatal(err)
	}
	return set
}
