package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// Reopener gives the receipt-log tests that need data to outlive a store
// what they need of a backend.
type Reopener struct {
	// Open opens a store on the same data every time it is called within
	// one test; the test closes what it opens.
	Open func(t *testing.T) store.Store
	// PreEntries rewrites the (closed) store's data to the receipt log of
	// before the entry layout, one row per receipt, holding rs under ids,
	// and marks the migration to entries as not applied.
	PreEntries func(t *testing.T, ids []int64, rs []wamux.Receipt)
}

// RunLog runs the receipt-log tests that close a store and open its data
// again: acknowledgements across a restart, and a log migrated from the
// per-receipt layout.
func RunLog(t *testing.T, newReopener func(t *testing.T) Reopener) {
	t.Run("AcksAcrossRestart", func(t *testing.T) { testLogAcksAcrossRestart(t, newReopener(t)) })
	t.Run("MigratesRowsPerReceipt", func(t *testing.T) { testLogMigrates(t, newReopener(t)) })
}

// awkward holds strings a log entry must carry unchanged (no NUL, which
// PostgreSQL text cannot hold).
var awkward = []string{"", `"quoted"`, `back\slash`, "tab\tnew\nline\r", "\x01\x1f", "ünïcödé ✓ 𝄞", "</script>&"}

func awkwardReceipt(i int) wamux.Receipt {
	s := awkward[i%len(awkward)]
	return wamux.Receipt{MessageID: "wamid." + s, AccountID: "acc" + s, Type: wamux.ReceiptDelivered,
		EventTime: time.UnixMilli(1_700_000_000_000 + int64(i)).UTC(), CallbackData: s, Recipient: "15550001",
		ErrorCode: 131000 + i, ErrorTitle: s, Source: "webhook", ReceivedAt: time.UnixMilli(1_700_000_001_000).UTC()}
}

func listLog(t *testing.T, s store.Store) []store.LoggedReceipt {
	t.Helper()
	got, err := s.ListReceiptLog(context.Background(), 0, 100)
	must(t, err)
	return got
}

// testLogAcksAcrossRestart: acknowledgements may live in memory, so after
// a restart a receipt acknowledged before it may be listed again
// (processing it again is harmless) but none not acknowledged may be
// missing; acknowledging everything empties the log for good.
func testLogAcksAcrossRestart(t *testing.T, r Reopener) {
	bg := context.Background()
	s := r.Open(t)
	rs := []wamux.Receipt{awkwardReceipt(0), awkwardReceipt(1), awkwardReceipt(2)}
	ids, err := s.AppendReceiptLog(bg, rs)
	must(t, err)
	if n, err := s.AckReceiptLog(bg, ids[:1]); err != nil || n != 1 {
		t.Fatalf("ack = %d, %v; want 1", n, err)
	}
	if got := listLog(t, s); len(got) != 2 || got[0].ID != ids[1] || got[1].ID != ids[2] {
		t.Fatalf("log = %+v, want the two receipts not acknowledged", got)
	}
	must(t, s.Close())

	s = r.Open(t)
	got := listLog(t, s)
	if len(got) < 2 {
		t.Fatalf("after restart the log lists %d receipts; the 2 not acknowledged must be there", len(got))
	}
	for _, l := range got {
		i := 0
		for i < len(ids) && ids[i] != l.ID {
			i++
		}
		if i == len(ids) || l.Receipt != rs[i] {
			t.Fatalf("after restart the log holds %+v, not one of the appended receipts", l)
		}
	}
	if n, err := s.AckReceiptLog(bg, append(ids, ids[0])); err != nil || n < 2 || n > 3 {
		t.Fatalf("ack after restart = %d, %v; want the 2 or 3 listed", n, err)
	}
	if got := listLog(t, s); len(got) != 0 {
		t.Fatalf("log after acknowledging everything = %+v", got)
	}
	must(t, s.Close())
	s = r.Open(t)
	defer s.Close()
	if got := listLog(t, s); len(got) != 0 {
		t.Fatalf("after another restart the log holds %+v", got)
	}
}

// testLogMigrates: receipts waiting in the per-receipt log come out of the
// entry layout unchanged, in order, and can be acknowledged; new ids
// follow them.
func testLogMigrates(t *testing.T, r Reopener) {
	bg := context.Background()
	must(t, r.Open(t).Close())
	var rs []wamux.Receipt
	for i := range 3 {
		rs = append(rs, awkwardReceipt(i+3))
	}
	r.PreEntries(t, []int64{7, 8, 12}, rs)

	s := r.Open(t)
	defer s.Close()
	got := listLog(t, s)
	if len(got) != len(rs) {
		t.Fatalf("migrated log lists %d receipts, want %d", len(got), len(rs))
	}
	for i := range rs {
		if got[i].Receipt != rs[i] || (i > 0 && got[i].ID <= got[i-1].ID) {
			t.Fatalf("migrated log[%d] = %+v, want %+v in order", i, got[i], rs[i])
		}
	}
	ids, err := s.AppendReceiptLog(bg, []wamux.Receipt{awkwardReceipt(0)})
	must(t, err)
	if ids[0] <= got[len(got)-1].ID {
		t.Fatalf("new id %d not after the migrated ones (last %d)", ids[0], got[len(got)-1].ID)
	}
	if n, err := s.AckReceiptLog(bg, []int64{got[0].ID, got[1].ID, got[2].ID}); err != nil || n != 3 {
		t.Fatalf("ack of migrated receipts = %d, %v; want 3", n, err)
	}
	if left := listLog(t, s); len(left) != 1 || left[0].ID != ids[0] {
		t.Fatalf("log after ack = %+v, want only the new receipt", left)
	}
}
