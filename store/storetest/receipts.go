package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

var receiptBase = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testReceipt(msg, account string, typ wamux.ReceiptType) wamux.Receipt {
	return wamux.Receipt{
		MessageID: msg, AccountID: account, Type: typ, EventTime: receiptBase.Add(time.Duration(typ.Version()) * time.Second),
		CallbackData: "cb-" + msg, Recipient: "+4917", Source: "webhook", ReceivedAt: receiptBase.Add(time.Hour),
	}
}

func sameReceipt(a, b wamux.Receipt) bool {
	return a.MessageID == b.MessageID && a.AccountID == b.AccountID && a.Type == b.Type &&
		a.EventTime.Equal(b.EventTime) && a.CallbackData == b.CallbackData && a.Recipient == b.Recipient &&
		a.ErrorCode == b.ErrorCode && a.ErrorTitle == b.ErrorTitle && a.Source == b.Source &&
		a.ReceivedAt.Equal(b.ReceivedAt)
}

func key(r wamux.Receipt) store.ReceiptKey {
	return store.ReceiptKey{MessageID: r.MessageID, AccountID: r.AccountID, Type: r.Type}
}

func wantBools(t *testing.T, what string, got []bool, want ...bool) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func testReceipts(t *testing.T, newStore NewStore) {
	t.Run("UniqueTriple", func(t *testing.T) {
		s := newStore(t)
		a := testReceipt("w1", "acc1", wamux.ReceiptSent)
		b := testReceipt("w1", "acc1", wamux.ReceiptDelivered) // other type
		c := testReceipt("w1", "acc2", wamux.ReceiptSent)      // other account
		d := testReceipt("w2", "acc1", wamux.ReceiptSent)      // other message
		aLater := a
		aLater.EventTime = a.EventTime.Add(time.Minute) // same triple, other details

		got, err := s.InsertReceipts(ctx(t), []wamux.Receipt{a, b, a, aLater})
		must(t, err)
		wantBools(t, "first insert", got, true, true, false, false)
		got, err = s.InsertReceipts(ctx(t), []wamux.Receipt{c, a, d, b, c})
		must(t, err)
		wantBools(t, "second insert", got, true, false, true, false, false)

		e := testReceipt("w3", "acc1", wamux.ReceiptRead)
		has, err := s.HasReceipts(ctx(t), []store.ReceiptKey{key(a), key(e), key(b), key(c), key(d),
			{MessageID: "w1", AccountID: "acc1", Type: wamux.ReceiptRead}})
		must(t, err)
		wantBools(t, "HasReceipts", has, true, false, true, true, true, false)
		has, err = s.HasReceipts(ctx(t), nil)
		must(t, err)
		if len(has) != 0 {
			t.Fatalf("HasReceipts(nil) = %v", has)
		}

		list, err := s.ListReceipts(ctx(t), "acc1", "w1")
		must(t, err)
		if len(list) != 2 {
			t.Fatalf("ListReceipts = %+v, want sent and delivered", list)
		}
		found := map[wamux.ReceiptType]wamux.Receipt{}
		for _, r := range list {
			found[r.Type] = r
			wantUTC(t, "EventTime", r.EventTime)
		}
		// The first stored version wins; a later repeat changes nothing.
		if !sameReceipt(found[wamux.ReceiptSent], a) || !sameReceipt(found[wamux.ReceiptDelivered], b) {
			t.Fatalf("stored receipts = %+v, want %+v and %+v", list, a, b)
		}
	})
	t.Run("RoundTrip", func(t *testing.T) {
		s := newStore(t)
		r := testReceipt("w9", "acc1", wamux.ReceiptFailed)
		r.ErrorCode, r.ErrorTitle, r.Source = 131026, "Message undeliverable", "agent"
		r.EventTime = time.Date(2026, 3, 1, 12, 0, 0, 987_654_321, time.FixedZone("X", 3600))
		got, err := s.InsertReceipts(ctx(t), []wamux.Receipt{r})
		must(t, err)
		wantBools(t, "insert", got, true)
		list, err := s.ListReceipts(ctx(t), "acc1", "w9")
		must(t, err)
		want := r
		want.EventTime = msTime(r.EventTime)
		if len(list) != 1 || !sameReceipt(list[0], want) || !list[0].EventTime.Equal(want.EventTime) {
			t.Fatalf("round trip = %+v, want %+v", list, want)
		}
		wantUTC(t, "EventTime", list[0].EventTime)
		none, err := s.ListReceipts(ctx(t), "acc2", "w9")
		must(t, err)
		if len(none) != 0 {
			t.Fatalf("receipts of another account = %+v", none)
		}
	})
	t.Run("LargeBatch", func(t *testing.T) {
		s := newStore(t)
		// More rows than one multi-row statement holds in either backend,
		// with every third row a repeat of an earlier one.
		const n = 5000
		rs := make([]wamux.Receipt, 0, n)
		for i := 0; i < n; i++ {
			id := i
			if i%3 == 2 {
				id = i - 2
			}
			rs = append(rs, testReceipt(fmt.Sprintf("w%d", id), "acc1", wamux.ReceiptSent))
		}
		got, err := s.InsertReceipts(ctx(t), rs)
		must(t, err)
		newCount := 0
		for i, g := range got {
			if g != (i%3 != 2) {
				t.Fatalf("receipt %d new = %v", i, g)
			}
			if g {
				newCount++
			}
		}
		again, err := s.InsertReceipts(ctx(t), rs[:10])
		must(t, err)
		for i, g := range again {
			if g {
				t.Fatalf("receipt %d reported new on the second insert", i)
			}
		}
		keys := make([]store.ReceiptKey, 0, n+1)
		for _, r := range rs {
			keys = append(keys, key(r))
		}
		keys = append(keys, store.ReceiptKey{MessageID: "w-missing", AccountID: "acc1", Type: wamux.ReceiptSent})
		has, err := s.HasReceipts(ctx(t), keys)
		must(t, err)
		for i, h := range has {
			if h != (i < n) {
				t.Fatalf("HasReceipts[%d] = %v", i, h)
			}
		}
	})
	t.Run("CallbackData", func(t *testing.T) { testCallbackReceipts(t, newStore(t)) })
	t.Run("Invalid", func(t *testing.T) {
		s := newStore(t)
		_, err := s.InsertReceipts(ctx(t), []wamux.Receipt{{MessageID: "w1", Type: wamux.ReceiptSent}})
		wantCode(t, err, wamux.EInvalid)
	})
	t.Run("WithStates", func(t *testing.T) {
		s := newStore(t)
		w, ok := s.(store.ReceiptStateWriter)
		if !ok {
			t.Skip("the store writes receipts and states apart")
		}
		a := testReceipt("w1", "acc1", wamux.ReceiptSent)
		b := testReceipt("w1", "acc1", wamux.ReceiptRead)
		c := testReceipt("w2", "acc1", wamux.ReceiptSent)
		st := func(r wamux.Receipt) store.MessageState {
			return store.MessageState{StateKey: store.StateKey{AccountID: r.AccountID, MessageID: r.MessageID}, Type: r.Type, EventTime: r.EventTime}
		}
		got, err := w.InsertReceiptsPutStates(ctx(t), []wamux.Receipt{a, c}, []store.MessageState{st(a), st(c)})
		must(t, err)
		wantBools(t, "first write", got, true, true)
		// A bad state fails the whole write: b is not stored either.
		_, err = w.InsertReceiptsPutStates(ctx(t), []wamux.Receipt{b}, []store.MessageState{st(b), {Type: wamux.ReceiptRead}})
		wantCode(t, err, wamux.EInvalid)
		has, err := s.HasReceipts(ctx(t), []store.ReceiptKey{key(a), key(b), key(c)})
		must(t, err)
		wantBools(t, "HasReceipts after the failed write", has, true, false, true)
		// A state may be of a message none of the receipts is about.
		d := testReceipt("w3", "acc2", wamux.ReceiptDelivered)
		got, err = w.InsertReceiptsPutStates(ctx(t), []wamux.Receipt{a, b}, []store.MessageState{st(b), st(d)})
		must(t, err)
		wantBools(t, "second write", got, false, true)
		states, err := s.GetStates(ctx(t), []store.StateKey{st(a).StateKey, st(c).StateKey, st(d).StateKey})
		must(t, err)
		if g := states[st(d).StateKey]; g.Type != wamux.ReceiptDelivered || !g.EventTime.Equal(d.EventTime) {
			t.Fatalf("state of w3 = %+v, want delivered", g)
		}
		if g := states[st(a).StateKey]; g.Type != wamux.ReceiptRead || !g.EventTime.Equal(b.EventTime) {
			t.Fatalf("state of w1 = %+v, want read", g)
		}
		if g := states[st(c).StateKey]; g.Type != wamux.ReceiptSent {
			t.Fatalf("state of w2 = %+v, want sent", g)
		}
		// PutStates replaces a state written with its receipt by a weaker
		// one: the receipt pipeline undoes so what a stored receipt did.
		must(t, s.PutStates(ctx(t), []store.MessageState{st(a)}))
		states, err = s.GetStates(ctx(t), []store.StateKey{st(a).StateKey})
		must(t, err)
		if g := states[st(a).StateKey]; g.Type != wamux.ReceiptSent || !g.EventTime.Equal(a.EventTime) {
			t.Fatalf("state of w1 after PutStates of sent = %+v, want sent", g)
		}
		got, err = w.InsertReceiptsPutStates(ctx(t), nil, nil)
		if err != nil || len(got) != 0 {
			t.Fatalf("empty write = %v, %v", got, err)
		}
	})
}

func testStates(t *testing.T, s store.Store) {
	k1 := store.StateKey{AccountID: "acc1", MessageID: "w1"}
	k2 := store.StateKey{AccountID: "acc1", MessageID: "w2"}
	k3 := store.StateKey{AccountID: "acc2", MessageID: "w1"}
	got, err := s.GetStates(ctx(t), []store.StateKey{k1, k2})
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("fresh GetStates = %v", got)
	}
	t1 := receiptBase.Add(1500 * time.Millisecond)
	must(t, s.PutStates(ctx(t), []store.MessageState{
		{StateKey: k1, Type: wamux.ReceiptSent, EventTime: t1},
		{StateKey: k2, Type: wamux.ReceiptFailed, EventTime: t1, ErrorCode: 131047},
	}))
	must(t, s.PutStates(ctx(t), []store.MessageState{{StateKey: k1, Type: wamux.ReceiptRead, EventTime: t1.Add(time.Second)}}))
	got, err = s.GetStates(ctx(t), []store.StateKey{k1, k2, k3})
	must(t, err)
	if len(got) != 2 {
		t.Fatalf("GetStates = %v, want k1 and k2 only", got)
	}
	if g := got[k1]; g.StateKey != k1 || g.Type != wamux.ReceiptRead || !g.EventTime.Equal(t1.Add(time.Second)) || g.ErrorCode != 0 {
		t.Fatalf("replaced state = %+v", g)
	}
	if g := got[k2]; g.StateKey != k2 || g.Type != wamux.ReceiptFailed || !g.EventTime.Equal(t1) || g.ErrorCode != 131047 {
		t.Fatalf("state k2 = %+v", g)
	}
	// Insert or replace: a weaker state replaces a stronger one too (the
	// merge rule is the pipeline's, not the store's).
	must(t, s.PutStates(ctx(t), []store.MessageState{{StateKey: k2, Type: wamux.ReceiptSent, EventTime: t1}}))
	weaker, err := s.GetStates(ctx(t), []store.StateKey{k2})
	must(t, err)
	if g := weaker[k2]; g.Type != wamux.ReceiptSent || g.ErrorCode != 0 {
		t.Fatalf("state k2 after PutStates of sent = %+v, want sent", g)
	}
	wantUTC(t, "state EventTime", got[k1].EventTime)
	wantUTC(t, "state UpdatedAt", got[k1].UpdatedAt)
	// k3 differs from k1 only by account.
	if _, ok := got[k3]; ok {
		t.Fatal("state of another account returned")
	}
}

// testCallbackReceipts: HasCallbackReceipts reports a key only when the
// receipt stored under it (the first copy: later ones are repeats) carries
// callback data. An agent's copy first, then the webhook's with callback
// data, leaves a row without; the other way round, a row with. The
// receipt pipeline confirms with it that a receipt naming our msg_id is a
// repeat of one that named it too, and must not be told so otherwise.
func testCallbackReceipts(t *testing.T, s store.Store) {
	without := func(r wamux.Receipt) wamux.Receipt {
		r.CallbackData, r.Source = "", "agent"
		return r
	}
	agentFirst := testReceipt("w1", "acc1", wamux.ReceiptDelivered)
	webhookFirst := testReceipt("w2", "acc1", wamux.ReceiptDelivered)
	agentFirstInCall := testReceipt("w3", "acc1", wamux.ReceiptSent)
	webhookFirstInCall := testReceipt("w4", "acc1", wamux.ReceiptSent)
	// A type the SQLite state cache has no bit for.
	unknownType := testReceipt("w5", "acc1", "deleted")
	otherAccount := testReceipt("w2", "acc2", wamux.ReceiptDelivered) // not stored

	got, err := s.InsertReceipts(ctx(t), []wamux.Receipt{without(agentFirst), webhookFirst,
		without(agentFirstInCall), agentFirstInCall, webhookFirstInCall, without(webhookFirstInCall), unknownType})
	must(t, err)
	wantBools(t, "first insert", got, true, true, true, false, true, false, true)
	got, err = s.InsertReceipts(ctx(t), []wamux.Receipt{agentFirst, without(webhookFirst)})
	must(t, err)
	wantBools(t, "second insert", got, false, false)
	keys := []store.ReceiptKey{key(agentFirst), key(webhookFirst), key(agentFirstInCall), key(webhookFirstInCall),
		key(unknownType), key(otherAccount), {MessageID: "w1", AccountID: "acc1", Type: wamux.ReceiptRead}}
	has, err := s.HasReceipts(ctx(t), keys)
	must(t, err)
	wantBools(t, "HasReceipts", has, true, true, true, true, true, false, false)
	cb, err := s.HasCallbackReceipts(ctx(t), keys)
	must(t, err)
	wantBools(t, "HasCallbackReceipts", cb, false, true, false, true, true, false, false)

	// Written together with states, as the pipeline writes them.
	if w, ok := s.(store.ReceiptStateWriter); ok {
		read := testReceipt("w1", "acc1", wamux.ReceiptRead)
		readAgent := without(testReceipt("w2", "acc1", wamux.ReceiptRead))
		state := func(r wamux.Receipt) store.MessageState {
			return store.MessageState{StateKey: store.StateKey{AccountID: r.AccountID, MessageID: r.MessageID}, Type: r.Type, EventTime: r.EventTime}
		}
		got, err := w.InsertReceiptsPutStates(ctx(t), []wamux.Receipt{read, readAgent, without(agentFirst), webhookFirst},
			[]store.MessageState{state(read), state(readAgent)})
		must(t, err)
		wantBools(t, "write with states", got, true, true, false, false)
		cb, err := s.HasCallbackReceipts(ctx(t), []store.ReceiptKey{key(read), key(readAgent), key(agentFirst), key(webhookFirst)})
		must(t, err)
		wantBools(t, "HasCallbackReceipts after the write with states", cb, true, false, false, true)
	}
	cb, err = s.HasCallbackReceipts(ctx(t), nil)
	must(t, err)
	if len(cb) != 0 {
		t.Fatalf("HasCallbackReceipts(nil) = %v", cb)
	}
}
