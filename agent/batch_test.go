package agent

import (
	"context"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

func TestReportBatch(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	a := newTestAgent(t, g, t.TempDir(), nil)
	rs := testReceipts("batch", 400)
	reportAll(t, a, rs[:10]) // already reported: repeats in the batch below

	batch := append(append([]Receipt{}, rs...), rs[100:150]...) // repeats inside the batch too
	if err := a.ReportBatch(context.Background(), batch); err != nil {
		t.Fatalf("ReportBatch: %v", err)
	}
	// Calling again with the same receipts is safe: all repeats.
	if err := a.ReportBatch(context.Background(), rs); err != nil {
		t.Fatalf("ReportBatch again: %v", err)
	}
	closeAgent(t, a)

	if st := a.Stats(); st.Reported != 400 || st.DroppedRepeats != 10+50+400 || st.Acked != 400 {
		t.Errorf("Stats = %+v, want 400 reported, 460 dropped, 400 acked", st)
	}
	c := g.counts()
	for _, r := range rs {
		if k := (store.ReceiptKey{MessageID: r.MessageID, AccountID: testAccount, Type: r.Type}); c.seen[k] != 1 {
			t.Errorf("gateway saw %v %d times, want once", k, c.seen[k])
		}
	}
	g.wantStored(t, rs)
}

func TestReportBatchRejectsInvalidBeforeSpooling(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	a := newTestAgent(t, g, t.TempDir(), nil)
	rs := testReceipts("badbatch", 5)
	rs[3].Type = "seen"
	if err := a.ReportBatch(context.Background(), rs); wamux.ErrorCode(err) != wamux.EInvalid {
		t.Fatalf("ReportBatch = %v, want an invalid error", err)
	}
	rs[3].Type, rs[3].EventTime = wamux.ReceiptRead, time.UnixMilli(1_764_000_000_000)
	if err := a.ReportBatch(context.Background(), rs); err != nil {
		t.Fatalf("ReportBatch after the fix: %v", err)
	}
	closeAgent(t, a)
	if st := a.Stats(); st.Reported != 5 || st.DroppedRepeats != 0 {
		t.Errorf("Stats = %+v, want 5 reported, none dropped", st)
	}
	g.wantStored(t, rs)
}

func TestReportBatchAfterClose(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	a := newTestAgent(t, g, t.TempDir(), nil)
	closeAgent(t, a)
	if err := a.ReportBatch(context.Background(), testReceipts("closed", 3)); err == nil {
		t.Fatal("ReportBatch after Close succeeded")
	}
	// The failed claims were forgotten: nothing counts as a repeat.
	if st := a.Stats(); st.DroppedRepeats != 0 || st.Reported != 0 {
		t.Errorf("Stats = %+v", st)
	}
}
