package bench

import (
	"context"
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/store"
)

// TestRunReceiptsSmall runs the receipts benchmark end to end at a small
// size: the pipeline must lose nothing, apply nothing twice and end in
// the independently computed states, and every layer's counts must add up.
func TestRunReceiptsSmall(t *testing.T) {
	rep, err := RunReceipts(context.Background(), ReceiptsConfig{Receipts: 5000, Dup: 0.2, Reorder: 0.1, Batch: 50, Callers: 8})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Lost != 0 || rep.DoubleApplied != 0 || rep.FinalStateMismatches != 0 {
		t.Fatalf("lost %d, double applied %d, mismatches %d", rep.Lost, rep.DoubleApplied, rep.FinalStateMismatches)
	}
	if rep.Distinct != 4000 || rep.Receipts != 5000 {
		t.Fatalf("generated %d receipts, %d distinct; want 5000, 4000", rep.Receipts, rep.Distinct)
	}
	dups := rep.DedupHits["batch"] + rep.DedupHits["lru"] + rep.DedupHits["bloom"] + rep.DedupHits["store"]
	if dups != 1000 || rep.Applied+rep.Ignored != 4000 {
		t.Fatalf("dedup hits %v (sum %d, want 1000), applied %d + ignored %d (want 4000)", rep.DedupHits, dups, rep.Applied, rep.Ignored)
	}
	if rep.ReceiptsPerSec <= 0 || rep.BaselineRowsPerSec <= 0 || rep.Ratio <= 0 || rep.CPUMicrosPerReceipt <= 0 || rep.BaselineCPUMicrosPerRow <= 0 {
		t.Fatalf("rates not measured: %+v", rep)
	}
}

// TestGenerateReceipts: the stream holds N receipts, N×dup of them
// repeats, and the expected state of a message is its strongest receipt.
func TestGenerateReceipts(t *testing.T) {
	w, err := generateReceipts(ReceiptsConfig{Receipts: 10000, Dup: 0.2, Reorder: 0.1, Accounts: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.stream) != 10000 || len(w.uniq) != 8000 || len(w.index) != 8000 {
		t.Fatalf("stream %d, distinct %d, index %d", len(w.stream), len(w.uniq), len(w.index))
	}
	moved := 0
	for i := 1; i < len(w.stream); i++ {
		if w.receipt(w.stream[i]).EventTime.Before(w.receipt(w.stream[i-1]).EventTime) {
			moved++
		}
	}
	if moved < 500 {
		t.Fatalf("only %d receipts arrive before an earlier event; the stream is hardly reordered", moved)
	}
	if _, err := generateReceipts(ReceiptsConfig{Receipts: 10000, Messages: 10, Accounts: 3, Dup: 0.1}); err == nil {
		t.Fatal("10 messages cannot carry 10000 distinct receipts, yet no error")
	}
}

// TestRunReceiptsSizesTheBloomFilter: --bloom-per-hour reaches L2. Sized
// for 100 keys an hour, the filter is saturated by 4,000 distinct keys,
// so it answers "maybe" for keys it never saw (false positives the store
// clears); the default size does not, and either way nothing is lost.
func TestRunReceiptsSizesTheBloomFilter(t *testing.T) {
	for _, perHour := range []uint{0, 100} {
		rep, err := RunReceipts(context.Background(), ReceiptsConfig{Receipts: 5000, Dup: 0.2, Reorder: 0.1, Batch: 50,
			Callers: 8, BloomPerHour: perHour})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Lost != 0 || rep.DoubleApplied != 0 || rep.FinalStateMismatches != 0 {
			t.Fatalf("bloom %d: lost %d, double applied %d, mismatches %d", perHour, rep.Lost, rep.DoubleApplied, rep.FinalStateMismatches)
		}
		switch {
		case perHour == 0 && (rep.BloomPerHour != receipts.BloomExpectedPerHourDefault || rep.BloomFalsePositives > 100):
			t.Fatalf("default: sized for %d, %d false positives", rep.BloomPerHour, rep.BloomFalsePositives)
		case perHour == 100 && (rep.BloomPerHour != 100 || rep.BloomFalsePositives < 1000):
			t.Fatalf("100 an hour: sized for %d, %d false positives; want a saturated filter", rep.BloomPerHour, rep.BloomFalsePositives)
		}
	}
}

// The observer counts a receipt applied twice once, whatever else comes:
// duplicates, other decisions, keys the workload does not hold.
func TestObserverCountsDoubleApplies(t *testing.T) {
	w, err := generateReceipts(ReceiptsConfig{Receipts: 1000, Dup: 0.2, Reorder: 0.1, Accounts: 3})
	if err != nil {
		t.Fatal(err)
	}
	key := func(i int32) store.ReceiptKey {
		r := w.receipt(i)
		return store.ReceiptKey{MessageID: r.MessageID, AccountID: r.AccountID, Type: r.Type}
	}
	o := newObserver(w)
	o.observe([]receipts.Processed{
		{Key: key(3), Decision: receipts.Apply},
		{Key: key(4), Decision: receipts.Apply},
		{Key: key(5), Decision: receipts.Ignore},
		{Key: store.ReceiptKey{MessageID: "wamid.none", AccountID: "acc00", Type: wamux.ReceiptSent}, Decision: receipts.Apply},
	})
	o.observe([]receipts.Processed{
		{Key: key(3), Decision: receipts.Apply},
		{Key: key(4), Duplicate: receipts.LayerBloom, Decision: receipts.Apply},
		{Key: key(5), Decision: receipts.Ignore},
	})
	if n := o.doubleApplied(); n != 1 {
		t.Fatalf("double applied %d, want 1 (receipt 3)", n)
	}
	if len(o.lat) != 6 {
		t.Fatalf("%d latencies, want 6 (the new ones)", len(o.lat))
	}
}

// The workload must tell the documented order from "the latest event
// wins": some messages' failure is stamped after their delivery (delivered
// still wins), some sent after their failure (failed still wins).
func TestGenerateReceiptsStrengthAgainstTime(t *testing.T) {
	w, err := generateReceipts(ReceiptsConfig{Receipts: 20000, Dup: 0.2, Reorder: 0.1, Accounts: 3})
	if err != nil {
		t.Fatal(err)
	}
	latest := make([]int32, w.messages) // the state if event time came first
	for i := range latest {
		latest[i] = -1
	}
	for i := range w.uniq {
		m := w.uniq[i].msg
		if latest[m] < 0 || w.receipt(int32(i)).EventTime.After(w.receipt(latest[m]).EventTime) {
			latest[m] = int32(i)
		}
	}
	var deliveredOverLaterFailed, failedOverLaterSent int
	for m, u := range w.want {
		if u < 0 || latest[m] == u {
			continue
		}
		switch got, want := w.receipt(latest[m]).Type, w.receipt(u).Type; {
		case got == wamux.ReceiptFailed && want == wamux.ReceiptDelivered:
			deliveredOverLaterFailed++
		case got == wamux.ReceiptSent && want == wamux.ReceiptFailed:
			failedOverLaterSent++
		}
	}
	if deliveredOverLaterFailed < 20 || failedOverLaterSent < 50 {
		t.Fatalf("%d messages delivered before a later failure, %d failed before a later sent; the workload cannot tell strength from time",
			deliveredOverLaterFailed, failedOverLaterSent)
	}
}

// A state written twice from one receipt is a double apply, whatever the
// pipeline reports to the observer.
func TestStateWritesCountDoubleApplies(t *testing.T) {
	w, err := generateReceipts(ReceiptsConfig{Receipts: 1000, Dup: 0.2, Reorder: 0.1, Accounts: 3})
	if err != nil {
		t.Fatal(err)
	}
	st, closeStore, err := openBenchStore(context.Background(), "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	c := countStateWrites(st, w)
	both, ok := c.store().(store.ReceiptStateWriter)
	if !ok {
		t.Fatal("the SQLite store's combined write is hidden by the counter")
	}
	state := func(i int32) store.MessageState {
		r := w.receipt(i)
		return store.MessageState{StateKey: store.StateKey{AccountID: r.AccountID, MessageID: r.MessageID},
			Type: r.Type, EventTime: r.EventTime, ErrorCode: r.ErrorCode}
	}
	ctx := context.Background()
	if _, err := both.InsertReceiptsPutStates(ctx, []wamux.Receipt{w.receipt(3)}, []store.MessageState{state(3)}); err != nil {
		t.Fatal(err)
	}
	if err := c.store().PutStates(ctx, []store.MessageState{state(4)}); err != nil {
		t.Fatal(err)
	}
	o := newObserver(w)
	if n := doubleApplied(o, c); n != 0 {
		t.Fatalf("double applied %d after one write each, want 0", n)
	}
	if _, err := both.InsertReceiptsPutStates(ctx, []wamux.Receipt{w.receipt(3)}, []store.MessageState{state(3)}); err != nil {
		t.Fatal(err)
	}
	if n := doubleApplied(o, c); n != 1 {
		t.Fatalf("double applied %d, want 1 (receipt 3's state written twice)", n)
	}
}
