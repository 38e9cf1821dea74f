package sqlite

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// getState reads one message's state, from the cache when it holds it;
// fromTable reads it past the cache.
func getState(t *testing.T, s *Store, k store.StateKey) (store.MessageState, bool) {
	t.Helper()
	got, err := s.GetStates(t.Context(), []store.StateKey{k})
	if err != nil {
		t.Fatalf("get states: %v", err)
	}
	st, ok := got[k]
	return st, ok
}

func fromTable(t *testing.T, s *Store, k store.StateKey) (store.MessageState, bool) {
	t.Helper()
	s.states.reset()
	return getState(t, s, k)
}

// The state cache answers GetStates with exactly what a read of the row
// would return (the store's millisecond precision, the stamp it gave a
// zero UpdatedAt), and only with committed rows: a request rolled back to
// its savepoint, or a lone request that fails, leaves the state before it.
func TestStateCacheHoldsCommittedRowsOnly(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	k := store.StateKey{AccountID: "acc1", MessageID: "wamid.S"}
	s1 := store.MessageState{StateKey: k, Type: wamux.ReceiptFailed, EventTime: time.Unix(1700000000, 123456789), ErrorCode: 131049}
	if err := s.PutStates(ctx, []store.MessageState{s1}); err != nil {
		t.Fatal(err)
	}
	cached, ok := getState(t, s, k)
	if !ok {
		t.Fatal("no state after PutStates")
	}
	stored, _ := fromTable(t, s, k)
	if cached != stored {
		t.Fatalf("cached state %+v, stored %+v", cached, stored)
	}
	if cached.UpdatedAt.IsZero() || !cached.EventTime.Equal(time.UnixMilli(1700000000123)) {
		t.Fatalf("state %+v: want the store's stamp and event time in ms", cached)
	}
	if err := s.PutStates(ctx, []store.MessageState{s1}); err != nil { // into the cache again
		t.Fatal(err)
	}
	before, _ := getState(t, s, k)

	errBoom := wamux.Errorf(wamux.EConflict, "boom")
	putThenFail := func(typ wamux.ReceiptType) func(w *writeTx) error {
		return func(w *writeTx) error {
			st := []store.MessageState{{StateKey: k, Type: typ, EventTime: time.UnixMilli(1700000009000)}}
			if err := w.putStates(st, []store.StateKey{k}, 1); err != nil {
				return err
			}
			return errBoom
		}
	}
	failInSharedBatch(t, s, putThenFail(wamux.ReceiptRead), errBoom)
	if got, _ := getState(t, s, k); got != before {
		t.Fatalf("after a request rolled back to its savepoint: %+v, want %+v", got, before)
	}
	if err := s.write(ctx, putThenFail(wamux.ReceiptDelivered)); !errors.Is(err, errBoom) {
		t.Fatalf("lone request: %v, want its own error", err)
	}
	if got, _ := getState(t, s, k); got != before {
		t.Fatalf("after a failed transaction: %+v, want %+v", got, before)
	}

	// A state of a type the cache has no slot for replaces the cached one.
	odd := store.MessageState{StateKey: k, Type: "deleted", EventTime: time.UnixMilli(1700000010000)}
	if err := s.PutStates(ctx, []store.MessageState{odd}); err != nil {
		t.Fatal(err)
	}
	if got, _ := getState(t, s, k); got.Type != "deleted" {
		t.Fatalf("state %+v, want the one of type deleted", got)
	}
}

// A state another process (here a second store on the same file) writes
// replaces the cached one once this store's writer has begun a
// transaction since: the cache is forgotten when data_version moved.
func TestStateCacheForgetsWhatAnotherProcessWrote(t *testing.T) {
	a := openInternal(t)
	ctx := t.Context()
	b := openSecond(t, a)
	k := store.StateKey{AccountID: "acc1", MessageID: "wamid.P"}
	if err := a.PutStates(ctx, []store.MessageState{{StateKey: k, Type: wamux.ReceiptSent, EventTime: time.UnixMilli(1000)}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := getState(t, a, k); got.Type != wamux.ReceiptSent {
		t.Fatalf("state %+v, want sent", got)
	}
	if err := b.PutStates(ctx, []store.MessageState{{StateKey: k, Type: wamux.ReceiptRead, EventTime: time.UnixMilli(3000)}}); err != nil {
		t.Fatal(err)
	}
	other := store.StateKey{AccountID: "acc1", MessageID: "wamid.Q"}
	if err := a.PutStates(ctx, []store.MessageState{{StateKey: other, Type: wamux.ReceiptSent, EventTime: time.UnixMilli(1000)}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := getState(t, a, k); got.Type != wamux.ReceiptRead || !got.EventTime.Equal(time.UnixMilli(3000)) {
		t.Fatalf("state %+v after the other process wrote read", got)
	}
}

// A transaction that fails after its requests succeeded (a failed COMMIT
// may have been durable) leaves no state of theirs in the cache, neither
// the new one nor the one before.
func TestPendingStatesOfAFailedTransactionAreForgotten(t *testing.T) {
	c := newStateCache()
	p := pendingStates{cache: c}
	old := cachedState{event: 1, stamp: 1, typ: 1}
	p.state(7, old)
	p.requestDone(true)
	p.txDone(true)
	if got, ok := c.get(7); !ok || got != old {
		t.Fatalf("committed row: %+v, %v", got, ok)
	}
	p.state(7, cachedState{event: 2, stamp: 2, typ: 3})
	p.requestDone(true)
	p.numbered(8)
	p.requestDone(false)
	p.txDone(false)
	if got, ok := c.get(7); ok {
		t.Fatalf("after a failed transaction the cache holds %+v", got)
	}
	if got, ok := c.get(8); ok {
		t.Fatalf("a rolled-back request left %+v", got)
	}
}

// Whatever GetStates and HasReceipts answer from the cache is what the
// table says: random receipts and states of messages numbered by this
// writer, by the index (the cache forgotten in between) and by requests
// rolled back, then every key asked with the cache and again past it.
func TestStateCacheAnswersAsTheTable(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(7, 7))
	types := []wamux.ReceiptType{wamux.ReceiptSent, wamux.ReceiptDelivered, wamux.ReceiptRead, wamux.ReceiptFailed, "deleted"}
	var msgs []store.StateKey
	for i := range 120 {
		msgs = append(msgs, store.StateKey{AccountID: fmt.Sprintf("acc%d", i%3), MessageID: fmt.Sprintf("wamid.%03d", i)})
	}
	receipt := func(k store.StateKey) wamux.Receipt {
		return wamux.Receipt{MessageID: k.MessageID, AccountID: k.AccountID, Type: types[rng.IntN(len(types))],
			EventTime: time.UnixMilli(int64(1000 + rng.IntN(5000)))}
	}
	errBoom := wamux.Errorf(wamux.EConflict, "boom")
	for round := range 6 {
		var rs []wamux.Receipt
		var sts []store.MessageState
		for range 40 {
			k := msgs[rng.IntN(len(msgs))]
			rs = append(rs, receipt(k))
			if rng.IntN(3) == 0 {
				r := receipt(k)
				sts = append(sts, store.MessageState{StateKey: k, Type: r.Type, EventTime: r.EventTime})
			}
		}
		if _, err := s.InsertReceipts(ctx, rs); err != nil {
			t.Fatal(err)
		}
		if err := s.PutStates(ctx, sts); err != nil {
			t.Fatal(err)
		}
		// A request that numbers, stores and writes a state, then fails.
		k := msgs[rng.IntN(len(msgs))]
		lost := store.StateKey{AccountID: "acc9", MessageID: fmt.Sprintf("wamid.lost%d", round)}
		err := s.write(ctx, func(w *writeTx) error {
			seqs, err := w.messageSeqs([]store.StateKey{k, lost})
			if err != nil {
				return err
			}
			w.states.receipt(seqs[0], wamux.ReceiptRead)
			w.states.receipt(seqs[1], wamux.ReceiptRead)
			w.states.state(seqs[0], cachedState{event: 1, stamp: 1, typ: 3})
			return errBoom
		})
		if !errors.Is(err, errBoom) {
			t.Fatalf("failing request: %v", err)
		}
		msgs = append(msgs, lost)
		switch round {
		case 2:
			fileKeysNow(t, s)
			s.numbers.reset()
		case 4:
			s.states.reset() // later writes meet messages numbered before
		}
	}
	var keys []store.ReceiptKey
	for _, k := range msgs {
		for _, typ := range types {
			keys = append(keys, store.ReceiptKey{MessageID: k.MessageID, AccountID: k.AccountID, Type: typ})
		}
	}
	has, err := s.HasReceipts(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	states, err := s.GetStates(ctx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	s.states.reset()
	wantHas, err := s.HasReceipts(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	wantStates, err := s.GetStates(ctx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	stored := 0
	for i := range keys {
		if has[i] != wantHas[i] {
			t.Errorf("HasReceipts(%v) = %v from the cache, %v from the table", keys[i], has[i], wantHas[i])
		}
		if wantHas[i] {
			stored++
		}
	}
	if len(states) != len(wantStates) {
		t.Errorf("%d states from the cache, %d from the table", len(states), len(wantStates))
	}
	for k, want := range wantStates {
		if got := states[k]; got != want {
			t.Errorf("state of %v = %+v from the cache, %+v from the table", k, got, want)
		}
	}
	if stored < 100 || len(wantStates) < 50 {
		t.Fatalf("only %d receipts and %d states stored; the test asks too little", stored, len(wantStates))
	}
}

// Reads skip the index for messages its filter says it lacks only while
// the ledger holds no number this store has not caught up with: a message
// another process numbered and filed in the index since is found, with
// its receipt and state, before this store writes again.
func TestReadsFindWhatAnotherProcessNumberedAndFiled(t *testing.T) {
	a := openInternal(t)
	ctx := t.Context()
	b := openSecond(t, a)
	fresh := store.StateKey{AccountID: "acc1", MessageID: "wamid.never"}
	k := store.StateKey{AccountID: "acc1", MessageID: "wamid.B"}
	rk := store.ReceiptKey{MessageID: k.MessageID, AccountID: k.AccountID, Type: wamux.ReceiptSent}
	ask := func(want bool) {
		t.Helper()
		has, err := a.HasReceipts(ctx, []store.ReceiptKey{rk, {MessageID: fresh.MessageID, AccountID: fresh.AccountID, Type: wamux.ReceiptSent}})
		if err != nil {
			t.Fatal(err)
		}
		st, err := a.GetStates(ctx, []store.StateKey{k, fresh})
		if err != nil {
			t.Fatal(err)
		}
		if has[0] != want || (st[k].Type == wamux.ReceiptSent) != want || has[1] || len(st) > 1 {
			t.Fatalf("has %v, states %+v; want the receipt and state of %v: %v", has, st, k, want)
		}
	}
	ask(false)
	if _, err := b.InsertReceipts(ctx, []wamux.Receipt{{MessageID: k.MessageID, AccountID: k.AccountID,
		Type: wamux.ReceiptSent, EventTime: time.UnixMilli(1000)}}); err != nil {
		t.Fatal(err)
	}
	if err := b.PutStates(ctx, []store.MessageState{{StateKey: k, Type: wamux.ReceiptSent, EventTime: time.UnixMilli(1000)}}); err != nil {
		t.Fatal(err)
	}
	fileKeysNow(t, b)
	ask(true)
}
