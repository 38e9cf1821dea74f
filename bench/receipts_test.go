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
