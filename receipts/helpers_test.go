package receipts_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/postgres/pgtest"
	"github.com/wamux/wamux/store/sqlite"
)

// backend opens a fresh store of one kind for a test.
type backend struct {
	name string
	open func(t testing.TB) store.Store
}

// backends are real SQLite always, and PostgreSQL when WAMUX_TEST_POSTGRES
// names a server (as in the store tests).
func backends() []backend {
	bs := []backend{{"sqlite", openSQLite}}
	if os.Getenv("WAMUX_TEST_POSTGRES") != "" {
		bs = append(bs, backend{"postgres", openPostgres})
	}
	return bs
}

func openSQLite(t testing.TB) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "wamux.db"), sqlite.Options{})
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func openPostgres(t testing.TB) store.Store {
	t.Helper()
	return pgtest.Open(t, pgtest.DSN(), "wamux_rcpt_")
}

// startPipeline builds and starts a pipeline with quick batching and
// stops it when the test ends.
func startPipeline(t testing.TB, cfg receipts.Config) *receipts.Pipeline {
	t.Helper()
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.BatchWait == 0 {
		cfg.BatchWait = 5 * time.Millisecond
	}
	if cfg.Retry.Base == 0 {
		cfg.Retry.Base = time.Millisecond
		cfg.Retry.Max = 10 * time.Millisecond
	}
	p, err := receipts.New(cfg)
	if err != nil {
		t.Fatalf("new pipeline: %v", err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatalf("start pipeline: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Errorf("stop pipeline: %v", err)
		}
	})
	return p
}

func flush(t testing.TB, p *receipts.Pipeline) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("flush: %v (stats %+v)", err, p.Stats())
	}
}

func ingest(t testing.TB, p *receipts.Pipeline, rs ...wamux.Receipt) receipts.IngestResult {
	t.Helper()
	res, err := p.Ingest(context.Background(), "agent", rs)
	if err != nil {
		t.Fatalf("ingest: %v", err)
	}
	return res
}

// rank is the strength order written out by hand, so expected states do
// not lean on the code under test.
var rank = map[wamux.ReceiptType]int{
	wamux.ReceiptSent: 0, wamux.ReceiptFailed: 1, wamux.ReceiptDelivered: 2, wamux.ReceiptRead: 3,
}

// expected computes, independently of Merge, the state the merge rule
// defines for a set of receipts: per message the greatest receipt by
// (strength, event time, error code).
func expected(rs []wamux.Receipt) map[store.StateKey]wamux.Receipt {
	out := map[store.StateKey]wamux.Receipt{}
	for _, r := range rs {
		k := store.StateKey{AccountID: r.AccountID, MessageID: r.MessageID}
		cur, ok := out[k]
		if !ok || greater(r, cur) {
			out[k] = r
		}
	}
	return out
}

func greater(a, b wamux.Receipt) bool {
	if rank[a.Type] != rank[b.Type] {
		return rank[a.Type] > rank[b.Type]
	}
	if !a.EventTime.Equal(b.EventTime) {
		return a.EventTime.After(b.EventTime)
	}
	return a.ErrorCode > b.ErrorCode
}

// checkStates fails unless the store holds exactly the expected states.
func checkStates(t testing.TB, st store.Store, want map[store.StateKey]wamux.Receipt) {
	t.Helper()
	keys := make([]store.StateKey, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	got, err := st.GetStates(context.Background(), keys)
	if err != nil {
		t.Fatalf("get states: %v", err)
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Fatalf("no state for %v, want %s", k, w.Type)
		}
		if g.Type != w.Type || !g.EventTime.Equal(w.EventTime) || g.ErrorCode != w.ErrorCode {
			t.Fatalf("state of %v = %s@%v code %d, want %s@%v code %d", k, g.Type, g.EventTime, g.ErrorCode,
				w.Type, w.EventTime, w.ErrorCode)
		}
	}
}

// checkStored fails unless every receipt's unique triple is stored.
func checkStored(t testing.TB, st store.Store, rs []wamux.Receipt) {
	t.Helper()
	keys := make([]store.ReceiptKey, len(rs))
	for i, r := range rs {
		keys[i] = store.ReceiptKey{MessageID: r.MessageID, AccountID: r.AccountID, Type: r.Type}
	}
	has, err := st.HasReceipts(context.Background(), keys)
	if err != nil {
		t.Fatalf("has receipts: %v", err)
	}
	for i, h := range has {
		if !h {
			t.Fatalf("receipt %v was lost", keys[i])
		}
	}
}

var base = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func rcpt(acc, msg string, typ wamux.ReceiptType, sec int) wamux.Receipt {
	return wamux.Receipt{AccountID: acc, MessageID: msg, Type: typ, EventTime: base.Add(time.Duration(sec) * time.Second)}
}
