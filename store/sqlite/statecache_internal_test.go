package sqlite

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/testwait"
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
	c := newStateCache(StateCacheDefault)
	p := pendingStates{cache: c}
	old := cachedState{event: 1, stamp: 1, typ: 1}
	p.state(7, old)
	p.requestDone(true)
	p.txDone(true)
	if got, ok := c.get(7); !ok || got != (cachedState{event: 1, stamp: 1, typ: 1, stateRow: true}) {
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

// Whatever GetStates, HasReceipts and HasCallbackReceipts answer from
// the cache is what the table says: random receipts and states of messages numbered by this
// writer, by the index (the cache forgotten in between) and by requests
// rolled back, then every key asked with the cache and again past it.
func TestStateCacheAnswersAsTheTable(t *testing.T) {
	// A cache of 64 messages (two per shard and generation) drops
	// entries all the time: what it still holds must be right.
	for _, size := range []int{StateCacheDefault, 64} {
		t.Run(fmt.Sprint(size), func(t *testing.T) { testStateCacheAnswersAsTheTable(t, size) })
	}
}

func testStateCacheAnswersAsTheTable(t *testing.T, size int) {
	s := openInternal(t)
	s.states = newStateCache(size)
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(7, 7))
	types := []wamux.ReceiptType{wamux.ReceiptSent, wamux.ReceiptDelivered, wamux.ReceiptRead, wamux.ReceiptFailed, "deleted"}
	var msgs []store.StateKey
	for i := range 120 {
		msgs = append(msgs, store.StateKey{AccountID: fmt.Sprintf("acc%d", i%3), MessageID: fmt.Sprintf("wamid.%03d", i)})
	}
	// Half the receipts carry callback data, so a key's stored row
	// carries some or not depending on which copy came first.
	receipt := func(k store.StateKey) wamux.Receipt {
		r := wamux.Receipt{MessageID: k.MessageID, AccountID: k.AccountID, Type: types[rng.IntN(len(types))],
			EventTime: time.UnixMilli(int64(1000 + rng.IntN(5000)))}
		if rng.IntN(2) == 0 {
			r.CallbackData = "msg-" + k.MessageID
		}
		return r
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
		// Receipts and states together, as the pipeline writes them:
		// states that are one of the call's receipts (derived from it
		// where the message allows), sometimes weaker than the state
		// before (replacing it all the same), sometimes of no receipt.
		// New messages join as they would: numbered by such a call.
		for range 3 {
			rs, sts = nil, nil
			for range 30 {
				k := msgs[rng.IntN(len(msgs))]
				if rng.IntN(4) == 0 {
					k = store.StateKey{AccountID: "acc5", MessageID: fmt.Sprintf("wamid.new%d", len(msgs))}
					msgs = append(msgs, k)
				}
				r := receipt(k)
				rs = append(rs, r)
				switch rng.IntN(4) {
				case 0, 1:
					sts = append(sts, store.MessageState{StateKey: k, Type: r.Type, EventTime: r.EventTime,
						ErrorCode: r.ErrorCode, UpdatedAt: time.UnixMilli(int64(9000 + rng.IntN(100)))})
				case 2:
					o := receipt(k)
					sts = append(sts, store.MessageState{StateKey: k, Type: o.Type, EventTime: o.EventTime})
				}
			}
			if _, err := s.InsertReceiptsPutStates(ctx, rs, sts); err != nil {
				t.Fatal(err)
			}
		}
		// A request that numbers, stores and writes a state, then fails.
		k := msgs[rng.IntN(len(msgs))]
		lost := store.StateKey{AccountID: "acc9", MessageID: fmt.Sprintf("wamid.lost%d", round)}
		err := s.write(ctx, func(w *writeTx) error {
			seqs, err := w.messageSeqs([]store.StateKey{k, lost})
			if err != nil {
				return err
			}
			w.states.receipt(seqs[0], wamux.ReceiptRead, true)
			w.states.receipt(seqs[1], wamux.ReceiptRead, true)
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
	ask := func() ([]bool, []bool, map[store.StateKey]store.MessageState) {
		has, err := s.HasReceipts(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		hasCB, err := s.HasCallbackReceipts(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		states, err := s.GetStates(ctx, msgs)
		if err != nil {
			t.Fatal(err)
		}
		return has, hasCB, states
	}
	has, hasCB, states := ask()
	s.states.reset()
	wantHas, wantCB, wantStates := ask()
	stored, withCB, withoutCB := 0, 0, 0
	for i := range keys {
		if has[i] != wantHas[i] {
			t.Errorf("HasReceipts(%v) = %v from the cache, %v from the table", keys[i], has[i], wantHas[i])
		}
		if hasCB[i] != wantCB[i] {
			t.Errorf("HasCallbackReceipts(%v) = %v from the cache, %v from the table", keys[i], hasCB[i], wantCB[i])
		}
		if wantCB[i] && !wantHas[i] {
			t.Errorf("HasCallbackReceipts(%v) without HasReceipts", keys[i])
		}
		if wantHas[i] {
			stored++
			if wantCB[i] {
				withCB++
			} else {
				withoutCB++
			}
		}
	}
	if withCB < 30 || withoutCB < 30 {
		t.Errorf("%d stored receipts with callback data, %d without; the test asks too little", withCB, withoutCB)
	}
	if len(states) != len(wantStates) {
		t.Errorf("%d states from the cache, %d from the table", len(states), len(wantStates))
	}
	for k, want := range wantStates {
		if got := states[k]; got != want {
			t.Errorf("state of %v = %+v from the cache, %+v from the table", k, got, want)
		}
	}
	if stored < 100 || len(wantStates) < 100 {
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

// A state that is one of the receipts stored with it, for a message whose
// rows the writer knows, is kept as that receipt's apply time instead of
// a state row; a read past the cache derives the same state. A state row
// is written instead when the state is below the one before (it still
// replaces it), when its receipt was stored already, or when the cache no
// longer knows the message; and a state row, once there, wins.
func TestDerivedStates(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	m := store.StateKey{AccountID: "acc1", MessageID: "wamid.M"}
	rcpt := func(k store.StateKey, typ wamux.ReceiptType, at int64) wamux.Receipt {
		return wamux.Receipt{MessageID: k.MessageID, AccountID: k.AccountID, Type: typ, EventTime: time.UnixMilli(at)}
	}
	state := func(r wamux.Receipt, updated int64) store.MessageState {
		return store.MessageState{StateKey: store.StateKey{AccountID: r.AccountID, MessageID: r.MessageID}, Type: r.Type,
			EventTime: r.EventTime, ErrorCode: r.ErrorCode, UpdatedAt: time.UnixMilli(updated)}
	}
	put := func(r wamux.Receipt, st store.MessageState) {
		t.Helper()
		if _, err := s.InsertReceiptsPutStates(ctx, []wamux.Receipt{r}, []store.MessageState{st}); err != nil {
			t.Fatal(err)
		}
	}
	stateRows := func() int {
		t.Helper()
		var n int
		if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM message_receipts WHERE entry = ''`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	want := func(k store.StateKey, st store.MessageState, rows int) {
		t.Helper()
		cached, _ := getState(t, s, k)
		// Past the cache, without emptying the writer's.
		saved := s.states
		s.states = newStateCache(StateCacheDefault)
		stored, _ := getState(t, s, k)
		s.states = saved
		same := func(a, b store.MessageState) bool {
			return a.StateKey == b.StateKey && a.Type == b.Type && a.EventTime.Equal(b.EventTime) &&
				a.ErrorCode == b.ErrorCode && a.UpdatedAt.Equal(b.UpdatedAt)
		}
		if !same(cached, st) || !same(stored, st) {
			t.Fatalf("state of %s: cached %+v, stored %+v, want %+v", k.MessageID, cached, stored, st)
		}
		if n := stateRows(); n != rows {
			t.Fatalf("%d state rows, want %d", n, rows)
		}
	}

	sent := rcpt(m, wamux.ReceiptSent, 1000)
	put(sent, state(sent, 5000))
	want(m, state(sent, 5000), 0)
	m2 := store.StateKey{AccountID: "acc1", MessageID: "wamid.M2"}
	d2 := rcpt(m2, wamux.ReceiptSent, 1000)
	put(d2, state(d2, 5001))
	del := rcpt(m2, wamux.ReceiptDelivered, 2000)
	put(del, state(del, 5002))
	want(m2, state(del, 5002), 0)

	// Below the state before: a row, which replaces it.
	failed := rcpt(m2, wamux.ReceiptFailed, 3000)
	failed.ErrorCode = 131026
	put(failed, state(failed, 5003))
	want(m2, state(failed, 5003), 1)

	// Its receipt stored already: a row.
	n := store.StateKey{AccountID: "acc1", MessageID: "wamid.N"}
	nSent := rcpt(n, wamux.ReceiptSent, 1000)
	if _, err := s.InsertReceipts(ctx, []wamux.Receipt{nSent}); err != nil {
		t.Fatal(err)
	}
	put(nSent, state(nSent, 5004))
	want(n, state(nSent, 5004), 2)

	// The message no longer known to the cache: a row.
	s.states.reset()
	read := rcpt(m, wamux.ReceiptRead, 4000)
	put(read, state(read, 5005))
	want(m, state(read, 5005), 3)

	// A derived state replaced by a weaker one through PutStates.
	p := store.StateKey{AccountID: "acc1", MessageID: "wamid.P"}
	pRead := rcpt(p, wamux.ReceiptRead, 4000)
	put(pRead, state(pRead, 5006))
	want(p, state(pRead, 5006), 3)
	pSent := state(rcpt(p, wamux.ReceiptSent, 1000), 5007)
	if err := s.PutStates(ctx, []store.MessageState{pSent}); err != nil {
		t.Fatal(err)
	}
	want(p, pSent, 4)
}

// Within one transaction the cache lags: a message given a state row by
// an earlier request takes a row again, though the cache still calls it
// derivable; and an entry the cache made without knowing the message's
// rows (a derived state filed after the entry was dropped) is not.
func TestDerivedStatesWithinATransaction(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	q := store.StateKey{AccountID: "acc1", MessageID: "wamid.Q"}
	sent := wamux.Receipt{MessageID: q.MessageID, AccountID: q.AccountID, Type: wamux.ReceiptSent, EventTime: time.UnixMilli(1000)}
	if _, err := s.InsertReceiptsPutStates(ctx, []wamux.Receipt{sent}, nil); err != nil {
		t.Fatal(err)
	}
	failedState := store.MessageState{StateKey: q, Type: wamux.ReceiptFailed, EventTime: time.UnixMilli(1500), ErrorCode: 131026,
		UpdatedAt: time.UnixMilli(6000)}
	read := wamux.Receipt{MessageID: q.MessageID, AccountID: q.AccountID, Type: wamux.ReceiptRead, EventTime: time.UnixMilli(3000)}
	readState := store.MessageState{StateKey: q, Type: wamux.ReceiptRead, EventTime: read.EventTime, UpdatedAt: time.UnixMilli(6001)}

	release, blockerDone := blockWriter(t, s)
	first := enqueue(s, func(w *writeTx) error { return w.putStates([]store.MessageState{failedState}, []store.StateKey{q}, 1) })
	second := make(chan error, 1)
	go func() {
		_, err := s.InsertReceiptsPutStates(ctx, []wamux.Receipt{read}, []store.MessageState{readState})
		second <- err
	}()
	testwait.For(t, "the second request to queue", 10*time.Second, func() bool { return len(s.reqs) >= 2 })
	release()
	if err := errors.Join(<-blockerDone, <-first.done, <-second); err != nil {
		t.Fatal(err)
	}
	saved := s.states
	s.states = newStateCache(StateCacheDefault)
	stored, _ := getState(t, s, q)
	s.states = saved
	cached, _ := getState(t, s, q)
	if stored.Type != wamux.ReceiptRead || cached.Type != wamux.ReceiptRead || !stored.UpdatedAt.Equal(readState.UpdatedAt) {
		t.Fatalf("state: stored %+v, cached %+v; want read", stored, cached)
	}

	c := newStateCache(StateCacheDefault)
	c.apply(cacheOp{seq: 9, kind: opDerived, row: cachedState{typ: 1, event: 1}})
	p := pendingStates{cache: c}
	if p.derivable(9, cachedState{typ: 3, event: 2}) {
		t.Fatal("an entry that does not know the message's rows called derivable")
	}
}

// The cache is a ring: it holds the newest numbers, at least as many as
// asked for, a number goes when the one a ring later takes its slot, and
// a slot never answers for another number.
func TestStateCacheIsBounded(t *testing.T) {
	c := newStateCache(3 * stateChunk) // rounds up to 4 chunks
	if n := len(c.chunks) * stateChunk; n != 4*stateChunk {
		t.Fatalf("%d slots for %d messages; want the next power of two, %d", n, 3*stateChunk, 4*stateChunk)
	}
	ring := int64(4 * stateChunk)
	last := 3 * ring
	for seq := int64(1); seq <= last; seq++ {
		c.apply(cacheOp{seq: seq, kind: opNumbered})
		c.apply(cacheOp{seq: seq, kind: opState, row: cachedState{typ: 1, event: seq}})
	}
	for seq := last - ring + 1; seq <= last; seq++ {
		if v, ok := c.get(seq); !ok || v.event != seq || !v.complete || !v.stateRow {
			t.Fatalf("recent message %d: %+v, %v", seq, v, ok)
		}
	}
	for _, seq := range []int64{1, last - ring, last - 2*ring + 5} {
		if v, ok := c.get(seq); ok {
			t.Fatalf("message %d, a ring older than the newest, still answers: %+v", seq, v)
		}
	}
	// A write for an older number takes the slot; the newer number then
	// misses rather than answering with the older one's state.
	c.apply(cacheOp{seq: last - ring, kind: opState, row: cachedState{typ: 2, event: 7}})
	if v, ok := c.get(last - ring); !ok || v.event != 7 || v.complete {
		t.Fatalf("older message after its write: %+v, %v; want its state, not complete", v, ok)
	}
	if v, ok := c.get(last); ok {
		t.Fatalf("message %d answers after its slot went to %d: %+v", last, last-ring, v)
	}
	// A receipt for a message not held adds nothing (the entry would not
	// know its other rows).
	c.apply(cacheOp{seq: last, kind: opReceipt, row: cachedState{typ: 1}})
	if v, ok := c.get(last); ok {
		t.Fatalf("a receipt alone made an entry: %+v", v)
	}

	// Small caches round up to one chunk; reset empties every slot.
	c = newStateCache(64)
	if len(c.chunks) != 1 {
		t.Fatalf("%d chunks for 64 messages", len(c.chunks))
	}
	c.apply(cacheOp{seq: 5, kind: opNumbered})
	c.forget(6) // another number: no effect
	if _, ok := c.get(5); !ok {
		t.Fatal("forgetting 6 dropped 5")
	}
	c.reset()
	if _, ok := c.get(5); ok {
		t.Fatal("reset kept 5")
	}
	if _, ok := c.get(0); ok {
		t.Fatal("an empty slot answered for number 0")
	}
}

// HasCallbackReceipts is answered from the state cache for messages this
// writer numbered, as HasReceipts is (the receipt pipeline confirms every
// Bloom hit of a receipt with callback data with it): the entry knows
// which receipt rows carry callback data, the first copy's, whichever copy
// came later. The table, past the cache, says the same, whether the
// message's number is known or looked up in message_key_index.
func TestCallbackReceiptsAnsweredFromTheCache(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	agentFirst := wamux.Receipt{MessageID: "wamid.A", AccountID: "acc1", Type: wamux.ReceiptDelivered,
		EventTime: time.UnixMilli(2000), Source: "agent"}
	webhookFirst := agentFirst
	webhookFirst.MessageID = "wamid.B"
	withCallback := func(r wamux.Receipt) wamux.Receipt {
		r.CallbackData, r.Source = "m-"+r.MessageID, "webhook"
		return r
	}
	state := func(r wamux.Receipt) store.MessageState {
		return store.MessageState{StateKey: store.StateKey{AccountID: r.AccountID, MessageID: r.MessageID}, Type: r.Type, EventTime: r.EventTime}
	}
	// As the pipeline writes them: the first copies with the states they
	// make, the second ones as repeats.
	if _, err := s.InsertReceiptsPutStates(ctx, []wamux.Receipt{agentFirst, withCallback(webhookFirst)},
		[]store.MessageState{state(agentFirst), state(webhookFirst)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertReceiptsPutStates(ctx, []wamux.Receipt{withCallback(agentFirst), webhookFirst}, nil); err != nil {
		t.Fatal(err)
	}
	keys := []store.ReceiptKey{
		{MessageID: agentFirst.MessageID, AccountID: agentFirst.AccountID, Type: agentFirst.Type},
		{MessageID: webhookFirst.MessageID, AccountID: webhookFirst.AccountID, Type: webhookFirst.Type},
		{MessageID: webhookFirst.MessageID, AccountID: webhookFirst.AccountID, Type: wamux.ReceiptRead},
	}
	want := []bool{false, true, false}
	seq := make([]int64, len(keys))
	msgs := make([]store.StateKey, len(keys))
	for i, k := range keys {
		msgs[i] = store.StateKey{AccountID: k.AccountID, MessageID: k.MessageID}
	}
	if known, _ := s.lookupNumbers(msgs, seq); len(known) != len(keys) {
		t.Fatalf("%d of %d messages numbered in memory", len(known), len(keys))
	}
	for i, k := range keys {
		c, _ := s.states.get(seq[i])
		if has, known := c.hasReceipt(k.Type, true); !known || has != want[i] {
			t.Fatalf("cache entry of %v: callback receipt %v, known %v; want %v from memory", k, has, known, want[i])
		}
	}
	for _, from := range []string{"the cache", "the table by number", "the table through the index"} {
		got, err := s.HasCallbackReceipts(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("HasCallbackReceipts from %s = %v, want %v", from, got, want)
		}
		s.states.reset()
		if from == "the table by number" {
			fileKeysNow(t, s)
			s.numbers.reset()
		}
	}
}

// A slot stays 32 bytes (the ring's memory and cache-line budget, see
// stateChunk): the callback bits share cachedState.receipts for that.
func TestStateSlotSize(t *testing.T) {
	if n := unsafe.Sizeof(stateSlot{}); n != 32 {
		t.Fatalf("a state cache slot is %d bytes, want 32", n)
	}
}
