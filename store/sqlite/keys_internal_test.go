package sqlite

import (
	"errors"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// numberThenFail numbers the message and then fails, so that its request
// is rolled back with the key row it inserted.
func numberThenFail(k store.StateKey, errBoom error) func(w *writeTx) error {
	return func(w *writeTx) error {
		if _, err := w.messageSeqs([]store.StateKey{k}); err != nil {
			return err
		}
		return errBoom
	}
}

// A message number learned by a request that is then rolled back must not
// be remembered: the receipts stored later would be filed under a number
// that no key row names, and no lookup by provider id would find them.
// Covered for a request rolled back to its savepoint inside a shared batch
// and for a request that is the whole transaction.
func TestRolledBackMessageNumbersAreForgotten(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	errBoom := wamux.Errorf(wamux.EConflict, "boom")
	a := store.StateKey{AccountID: "acc1", MessageID: "wamid.A"}
	b := store.StateKey{AccountID: "acc1", MessageID: "wamid.B"}

	// In a batch: the blocker holds the writer so that both requests share
	// one transaction; the first is rolled back to its savepoint.
	release, blockerDone := blockWriter(t, s)
	failed := enqueue(s, numberThenFail(a, errBoom))
	other := enqueue(s, setting("other"))
	release()
	if err := <-blockerDone; err != nil {
		t.Fatalf("blocker: %v", err)
	}
	if err := <-failed.done; !errors.Is(err, errBoom) {
		t.Fatalf("failed request: %v, want its own error", err)
	}
	if err := <-other.done; err != nil {
		t.Fatalf("other request: %v", err)
	}
	// Alone: the failure rolls back the whole transaction.
	if err := s.write(ctx, numberThenFail(b, errBoom)); !errors.Is(err, errBoom) {
		t.Fatalf("lone request: %v, want its own error", err)
	}

	for _, k := range []store.StateKey{a, b} {
		fresh, err := s.InsertReceipts(ctx, []wamux.Receipt{{MessageID: k.MessageID, AccountID: k.AccountID,
			Type: wamux.ReceiptSent, EventTime: time.UnixMilli(1000)}})
		if err != nil || !fresh[0] {
			t.Fatalf("insert %s: %v, %v", k.MessageID, fresh, err)
		}
		if err := s.PutStates(ctx, []store.MessageState{{StateKey: k, Type: wamux.ReceiptSent, EventTime: time.UnixMilli(1000)}}); err != nil {
			t.Fatal(err)
		}
		rs, err := s.ListReceipts(ctx, k.AccountID, k.MessageID)
		if err != nil || len(rs) != 1 {
			t.Fatalf("receipts of %s = %+v, %v; want the one stored", k.MessageID, rs, err)
		}
		st, err := s.GetStates(ctx, []store.StateKey{k})
		if err != nil || st[k].Type != wamux.ReceiptSent {
			t.Fatalf("state of %s = %+v, %v; want sent", k.MessageID, st, err)
		}
	}
}

// The writer's cache carries numbers from the receipts' insert to the
// states' upsert and across transactions; whatever it answers must be
// the number in message_keys.
func TestCachedMessageNumbersMatchTheTable(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	var rs []wamux.Receipt
	for i := range 300 {
		rs = append(rs, wamux.Receipt{MessageID: "wamid." + string(rune('A'+i%26)) + string(rune('a'+i/26)),
			AccountID: "acc1", Type: wamux.ReceiptSent, EventTime: time.UnixMilli(int64(1000 + i))})
	}
	for start := 0; start < len(rs); start += 70 {
		if _, err := s.InsertReceipts(ctx, rs[start:min(start+70, len(rs))]); err != nil {
			t.Fatal(err)
		}
	}
	keys := make([]store.StateKey, len(rs))
	for i, r := range rs {
		keys[i] = store.StateKey{AccountID: r.AccountID, MessageID: r.MessageID}
	}
	var cached []int64
	if err := s.write(ctx, func(w *writeTx) error {
		var err error
		cached, err = w.messageSeqs(keys)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for i, k := range keys {
		var seq int64
		if err := s.rdb.QueryRowContext(ctx, "SELECT seq FROM message_keys WHERE account_id = ? AND message_id = ?",
			k.AccountID, k.MessageID).Scan(&seq); err != nil {
			t.Fatalf("%s: %v", k.MessageID, err)
		}
		if cached[i] != seq || seen[seq] {
			t.Fatalf("%s: cached number %d, table %d (seen before: %v)", k.MessageID, cached[i], seq, seen[seq])
		}
		seen[seq] = true
	}
}
