package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// RunEdgeCases runs edge-case checks on the receipt and message paths that
// both backends must answer alike.
func RunEdgeCases(t *testing.T, newStore NewStore) {
	t.Run("ReceiptsRepeatsAndOrder", func(t *testing.T) { edgeReceiptsRepeatsAndOrder(t, newStore(t)) })
	t.Run("States", func(t *testing.T) { edgeStates(t, newStore(t)) })
	t.Run("FindMessages", func(t *testing.T) { edgeFindMessages(t, newStore(t)) })
	t.Run("UpdateMessageCAS", func(t *testing.T) { edgeUpdateMessageCAS(t, newStore(t)) })
	t.Run("InboundCounts", func(t *testing.T) { edgeInboundCounts(t, newStore(t)) })
	t.Run("ListsTiesAndLimits", func(t *testing.T) { edgeListsTiesAndLimits(t, newStore(t)) })
	t.Run("TextEdges", func(t *testing.T) { edgeTextEdges(t, newStore(t)) })
	t.Run("NULBytes", func(t *testing.T) { edgeNULBytes(t, newStore(t)) })
	t.Run("UnstorableKeysAreAbsent", func(t *testing.T) { edgeUnstorableKeysAreAbsent(t, newStore(t)) })
	t.Run("InvalidUTF8", func(t *testing.T) { edgeInvalidUTF8(t, newStore(t)) })
}

// edgeReceiptsRepeatsAndOrder: of the receipts of one key, in one batch or
// across batches, the first stored is kept.
func edgeReceiptsRepeatsAndOrder(t *testing.T, s store.Store) {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := func(id string, typ wamux.ReceiptType, cb string) wamux.Receipt {
		return wamux.Receipt{MessageID: id, AccountID: "acc1", Type: typ, EventTime: base, CallbackData: cb, Source: "webhook"}
	}
	_, err := s.InsertReceipts(ctx(t), []wamux.Receipt{r("w0", wamux.ReceiptSent, "old")})
	must(t, err)
	in := []wamux.Receipt{
		r("w2", wamux.ReceiptSent, "first"), r("w1", wamux.ReceiptSent, "x"), r("w2", wamux.ReceiptSent, "second"),
		r("w0", wamux.ReceiptSent, "new"), r("w1", wamux.ReceiptRead, "y"), r("w2", wamux.ReceiptSent, "third"),
	}
	got, err := s.InsertReceipts(ctx(t), in)
	must(t, err)
	if fmt.Sprint(got) != "[true true false false true false]" {
		t.Errorf("InsertReceipts = %v", got)
	}
	ls, err := s.ListReceipts(ctx(t), "acc1", "w2")
	must(t, err)
	if len(ls) != 1 || ls[0].CallbackData != "first" {
		t.Errorf("w2 receipts = %+v, want the first", ls)
	}
	ls, err = s.ListReceipts(ctx(t), "acc1", "w0")
	must(t, err)
	if len(ls) != 1 || ls[0].CallbackData != "old" {
		t.Errorf("w0 receipts = %+v, want the stored one", ls)
	}
	edgeReceiptTypesAndEmpty(t, s, r)
}

// edgeReceiptTypesAndEmpty continues edgeReceiptsRepeatsAndOrder on its
// store: unknown receipt types are stored too and HasReceipts sees them;
// empty calls answer empty; a batch with an invalid receipt stores none.
func edgeReceiptTypesAndEmpty(t *testing.T, s store.Store, r func(id string, typ wamux.ReceiptType, cb string) wamux.Receipt) {
	got, err := s.InsertReceipts(ctx(t), []wamux.Receipt{r("w1", "custom", ""), r("w9", "custom", "")})
	must(t, err)
	if fmt.Sprint(got) != "[true true]" {
		t.Errorf("custom types = %v", got)
	}
	has, err := s.HasReceipts(ctx(t), []store.ReceiptKey{
		{MessageID: "w1", AccountID: "acc1", Type: "custom"}, {MessageID: "w1", AccountID: "acc1", Type: wamux.ReceiptRead},
		{MessageID: "w1", AccountID: "acc1", Type: wamux.ReceiptDelivered}, {MessageID: "w1", AccountID: "acc2", Type: wamux.ReceiptRead},
		{MessageID: "w9", AccountID: "acc1", Type: "custom"}, {MessageID: "w1", AccountID: "acc1", Type: "custom"},
		{MessageID: "nope", AccountID: "acc1", Type: wamux.ReceiptSent},
	})
	must(t, err)
	if fmt.Sprint(has) != "[true true false false true true false]" {
		t.Errorf("HasReceipts = %v", has)
	}
	has, err = s.HasReceipts(ctx(t), nil)
	must(t, err)
	if len(has) != 0 {
		t.Errorf("HasReceipts(nil) = %v", has)
	}
	got, err = s.InsertReceipts(ctx(t), nil)
	must(t, err)
	if len(got) != 0 {
		t.Errorf("InsertReceipts(nil) = %v", got)
	}
	_, err = s.InsertReceipts(ctx(t), []wamux.Receipt{r("w5", wamux.ReceiptSent, ""), {MessageID: "w6", AccountID: "acc1"}})
	wantCode(t, err, wamux.EInvalid)
	if has, _ := s.HasReceipts(ctx(t), []store.ReceiptKey{{MessageID: "w5", AccountID: "acc1", Type: wamux.ReceiptSent}}); has[0] {
		t.Errorf("invalid batch stored a receipt")
	}
}

func edgeStates(t *testing.T, s store.Store) {
	loc := time.FixedZone("X", 3600)
	ev := time.Date(2026, 3, 1, 12, 0, 0, 123_000_000, loc)
	up := time.Date(2026, 3, 1, 12, 0, 1, 7_000_000, loc)
	in := []store.MessageState{
		{StateKey: store.StateKey{AccountID: "acc1", MessageID: "a"}, Type: "custom", EventTime: ev, ErrorCode: 5, UpdatedAt: up},
		{StateKey: store.StateKey{AccountID: "acc1", MessageID: "b"}, Type: wamux.ReceiptFailed, EventTime: ev, ErrorCode: 1 << 40, UpdatedAt: up},
		{StateKey: store.StateKey{AccountID: "acc1", MessageID: "c"}, Type: wamux.ReceiptRead, EventTime: ev, ErrorCode: -3, UpdatedAt: up},
		{StateKey: store.StateKey{AccountID: "acc1", MessageID: "d"}, Type: wamux.ReceiptSent, EventTime: ev, UpdatedAt: up},
		{StateKey: store.StateKey{AccountID: "acc1", MessageID: "d"}, Type: wamux.ReceiptDelivered, EventTime: ev, UpdatedAt: up},
	}
	must(t, s.PutStates(ctx(t), in))
	keys := []store.StateKey{{AccountID: "acc1", MessageID: "a"}, {AccountID: "acc1", MessageID: "b"},
		{AccountID: "acc1", MessageID: "c"}, {AccountID: "acc1", MessageID: "d"}, {AccountID: "acc2", MessageID: "a"},
		{AccountID: "acc1", MessageID: "a"}}
	got, err := s.GetStates(ctx(t), keys)
	must(t, err)
	if len(got) != 4 {
		t.Errorf("GetStates = %d states, want 4: %+v", len(got), got)
	}
	for _, w := range in[:3] {
		g := got[w.StateKey]
		if g.Type != w.Type || !g.EventTime.Equal(w.EventTime) || g.ErrorCode != w.ErrorCode || !g.UpdatedAt.Equal(w.UpdatedAt) {
			t.Errorf("state %v = %+v, want %+v", w.StateKey, g, w)
		}
	}
	if g := got[in[3].StateKey]; g.Type != wamux.ReceiptDelivered {
		t.Errorf("repeated key: %+v, want the last (delivered)", g)
	}
	// Microseconds are truncated in both; the ms part must survive.
	must(t, s.PutStates(ctx(t), []store.MessageState{{StateKey: store.StateKey{AccountID: "acc1", MessageID: "e"},
		Type: wamux.ReceiptSent, EventTime: ev.Add(999 * time.Microsecond)}}))
	got, err = s.GetStates(ctx(t), []store.StateKey{{AccountID: "acc1", MessageID: "e"}})
	must(t, err)
	if g := got[store.StateKey{AccountID: "acc1", MessageID: "e"}]; !g.EventTime.Equal(msTime(ev)) || g.UpdatedAt.IsZero() {
		t.Errorf("µs state = %+v", g)
	} else {
		wantUTC(t, "EventTime", g.EventTime)
	}
	err = s.PutStates(ctx(t), []store.MessageState{{StateKey: store.StateKey{AccountID: "acc1"}, Type: wamux.ReceiptSent}})
	wantCode(t, err, wamux.EInvalid)
	got, err = s.GetStates(ctx(t), nil)
	must(t, err)
	if got == nil || len(got) != 0 {
		t.Errorf("GetStates(nil) = %#v", got)
	}
}

func edgeFindMessages(t *testing.T, s store.Store) {
	ids := []string{"m%", "m_", "m'1", `m"2`, `m\3`, "mü☃", "m 5", "M%"}
	for i, id := range ids {
		m := testMessage(id, "acc1", 0, "h")
		wantOutcome(t, insertOne(t, s, m), store.Inserted, "")
		_, err := s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: id, Status: wamux.StatusAccepted, WAMID: fmt.Sprintf("wamid.%d%%", i)})
		must(t, err)
	}
	names := func(ms []wamux.Message) string {
		var out []string
		for _, m := range ms {
			out = append(out, m.ID)
		}
		slices.Sort(out)
		return fmt.Sprint(out)
	}
	got, err := s.FindMessages(ctx(t), nil, []string{"m%", "m_", "m'1", `m"2`, `m\3`, "mü☃", "m 5", "m", "m%", "x"})
	must(t, err)
	if names(got) != `[m 5 m"2 m% m'1 m\3 m_ mü☃]` {
		t.Errorf("by msg_id = %s", names(got))
	}
	got, err = s.FindMessages(ctx(t), []string{"wamid.0%", "wamid.1%", "wamid.%"}, []string{"m%"})
	must(t, err)
	if names(got) != `[m% m_]` {
		t.Errorf("by wamid+msg_id = %s", names(got))
	}
	got, err = s.FindMessages(ctx(t), nil, nil)
	must(t, err)
	if len(got) != 0 {
		t.Errorf("empty = %v", got)
	}
	got, err = s.FindMessages(ctx(t), []string{}, []string{})
	must(t, err)
	if len(got) != 0 {
		t.Errorf("empty = %v", got)
	}
	big := make([]string, 40000)
	for i := range big {
		big[i] = fmt.Sprintf("nope-%d", i)
	}
	big[len(big)-1] = "m_"
	got, err = s.FindMessages(ctx(t), big, big)
	must(t, err)
	if names(got) != `[m_]` {
		t.Errorf("large lists = %s", names(got))
	}
}

func edgeUpdateMessageCAS(t *testing.T, s store.Store) {
	wantOutcome(t, insertOne(t, s, testMessage("m1", "acc1", 1, "h")), store.Inserted, "")
	wantOutcome(t, insertOne(t, s, testMessage("m2", "acc1", 2, "h")), store.Inserted, "")
	ok, err := s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "m1", From: []wamux.Status{}, Status: wamux.StatusSending})
	must(t, err)
	if !ok {
		t.Errorf("empty From must be unconditional")
	}
	ok, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "m1", From: []wamux.Status{wamux.StatusSending, wamux.StatusSending}, WAMID: "w1"})
	must(t, err)
	if g := getMessage(t, s, "m1"); !ok || g.Status != wamux.StatusSending || g.WAMID != "w1" {
		t.Errorf("empty Status: ok=%v %+v", ok, g)
	}
	// A new wamid overwrites the old one.
	ok, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "m1", WAMID: "w1b"})
	must(t, err)
	if g := getMessage(t, s, "m1"); !ok || g.WAMID != "w1b" {
		t.Errorf("overwrite: %+v", g)
	}
	// Same wamid on the same message is fine.
	ok, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "m1", WAMID: "w1b"})
	must(t, err)
	if !ok {
		t.Errorf("same wamid not applied")
	}
	// The old wamid is free again.
	ok, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "m2", WAMID: "w1"})
	must(t, err)
	if !ok {
		t.Errorf("freed wamid not applied")
	}
	// Conflict when the CAS would fail anyway: which wins?
	_, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "m2", From: []wamux.Status{wamux.StatusHeld}, WAMID: "w1b"})
	if err != nil {
		t.Errorf("failed CAS with a taken wamid: err %v, want false, nil", err)
	}
	// Moving to an account where its client_seq is taken.
	wantOutcome(t, insertOne(t, s, testMessage("m3", "acc2", 1, "h")), store.Inserted, "")
	_, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "m1", AccountID: "acc2"})
	wantCode(t, err, wamux.EConflict)
	_, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "nope", From: []wamux.Status{wamux.StatusQueued}})
	wantCode(t, err, wamux.ENotFound)
	_, err = s.UpdateMessage(ctx(t), store.MessageUpdate{})
	wantCode(t, err, wamux.EInvalid)
}

func edgeInboundCounts(t *testing.T, s store.Store) {
	in := func(a, w string) store.InboundMessage {
		return store.InboundMessage{AccountID: a, WAMID: w, Type: "text"}
	}
	n, err := s.AddInboundMessages(ctx(t), []store.InboundMessage{in("a", "1"), in("a", "2"), in("a", "1"), in("b", "1")})
	must(t, err)
	if n != 3 {
		t.Errorf("added %d, want 3", n)
	}
	n, err = s.AddInboundMessages(ctx(t), []store.InboundMessage{in("a", "1"), in("a", "3")})
	must(t, err)
	if n != 1 {
		t.Errorf("added %d, want 1", n)
	}
	_, err = s.AddInboundMessages(ctx(t), []store.InboundMessage{in("a", "4"), in("", "5")})
	wantCode(t, err, wamux.EInvalid)
}

func edgeListsTiesAndLimits(t *testing.T, s store.Store) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var ds []store.DeadLetter
	var ls []store.LateReceipt
	for i := range 5 {
		ds = append(ds, store.DeadLetter{Source: "s", Reason: fmt.Sprint(i), RecordedAt: at})
		ls = append(ls, store.LateReceipt{Receipt: wamux.Receipt{MessageID: "w", AccountID: "a", Type: wamux.ReceiptRead}, Reason: fmt.Sprint(i), RecordedAt: at})
	}
	must(t, s.AddDeadLetters(ctx(t), ds))
	must(t, s.AddLateReceipts(ctx(t), ls))
	for _, limit := range []int{0, -1, 3} {
		d, err := s.ListDeadLetters(ctx(t), limit)
		must(t, err)
		l, err := s.ListLateReceipts(ctx(t), limit)
		must(t, err)
		var dr, lr []string
		for _, x := range d {
			dr = append(dr, x.Reason)
		}
		for _, x := range l {
			lr = append(lr, x.Reason)
		}
		want := "[4 3 2 1 0]"
		if limit == 3 {
			want = "[4 3 2]"
		}
		if fmt.Sprint(dr) != want || fmt.Sprint(lr) != want {
			t.Errorf("limit %d: dead %v late %v, want %s", limit, dr, lr, want)
		}
	}
}

func edgeTextEdges(t *testing.T, s store.Store) {
	long := strings.Repeat("ü☃x", 200_000)
	m := testMessage("m-long", "acc1", 0, "h")
	m.To, m.LastError = long, "😀\u200d"
	wantOutcome(t, insertOne(t, s, m), store.Inserted, "")
	if g := getMessage(t, s, "m-long"); g.To != long || g.LastError != m.LastError {
		t.Errorf("long text did not round-trip")
	}
	r := wamux.Receipt{MessageID: "wamid.ü☃", AccountID: "acc1", Type: wamux.ReceiptRead, ErrorTitle: long, CallbackData: "😀"}
	got, err := s.InsertReceipts(ctx(t), []wamux.Receipt{r})
	must(t, err)
	ls, err := s.ListReceipts(ctx(t), "acc1", "wamid.ü☃")
	must(t, err)
	if !got[0] || len(ls) != 1 || ls[0].ErrorTitle != long || ls[0].CallbackData != "😀" {
		t.Errorf("unicode receipt did not round-trip")
	}
}

func edgeNULBytes(t *testing.T, s store.Store) {
	// A store may refuse text holding a NUL byte (PostgreSQL does),
	// but only as invalid input; one that keeps it finds it again.
	okOrInvalid := func(what string, err error) {
		t.Helper()
		if err != nil && wamux.ErrorCode(err) != wamux.EInvalid {
			t.Errorf("%s with a NUL byte: %v, want success or invalid", what, err)
		}
	}
	_, err := s.InsertMessages(ctx(t), []wamux.Message{testMessage("m\x00nul", "acc1", 0, "h")})
	okOrInvalid("InsertMessages", err)
	if err == nil {
		if _, gerr := s.GetMessage(ctx(t), "m\x00nul"); gerr != nil {
			t.Errorf("GetMessage of a stored msg_id with NUL: %v", gerr)
		}
		if f, ferr := s.FindMessages(ctx(t), nil, []string{"m\x00nul"}); ferr != nil || len(f) != 1 {
			t.Errorf("FindMessages of a stored msg_id with NUL: %d, %v", len(f), ferr)
		}
	}
	_, err = s.InsertReceipts(ctx(t), []wamux.Receipt{{MessageID: "w\x00", AccountID: "acc1", Type: wamux.ReceiptRead}})
	okOrInvalid("InsertReceipts", err)
	okOrInvalid("AddDeadLetters", s.AddDeadLetters(ctx(t), []store.DeadLetter{{Source: "s", Reason: "r\x00"}}))
}

func edgeUnstorableKeysAreAbsent(t *testing.T, s store.Store) {
	// Lookups by a key no backend can hold (PostgreSQL text refuses NUL
	// and invalid UTF-8) find nothing: ENotFound / false / absent, as the
	// contracts say for absent rows, not EInvalid for the whole call.
	wantOutcome(t, insertOne(t, s, testMessage("m1", "acc1", 0, "h")), store.Inserted, "")
	_, err := s.InsertReceipts(ctx(t), []wamux.Receipt{{MessageID: "w1", AccountID: "acc1", Type: wamux.ReceiptRead}})
	must(t, err)
	must(t, s.PutStates(ctx(t), []store.MessageState{{StateKey: store.StateKey{AccountID: "acc1", MessageID: "w1"}, Type: wamux.ReceiptRead}}))
	for _, bad := range []string{"x\x00", "x\xff"} {
		unstorableMessageKey(t, s, bad)
		unstorableReceiptKey(t, s, bad)
		unstorableAccountKey(t, s, bad)
		unstorableListFilter(t, s, bad)
	}
}

// unstorableMessageKey: no message has msg_id or wamid bad; m1 is found
// beside it.
func unstorableMessageKey(t *testing.T, s store.Store, bad string) {
	t.Helper()
	_, err := s.GetMessage(ctx(t), bad)
	wantCode(t, err, wamux.ENotFound)
	_, err = s.GetMessageByWAMID(ctx(t), bad)
	wantCode(t, err, wamux.ENotFound)
	_, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: bad, Status: wamux.StatusSent})
	wantCode(t, err, wamux.ENotFound)
	f, err := s.FindMessages(ctx(t), []string{bad}, []string{bad, "m1"})
	must(t, err)
	if len(f) != 1 || f[0].ID != "m1" {
		t.Errorf("FindMessages(%q, m1) = %v, want m1", bad, f)
	}
}

// unstorableReceiptKey: no receipt or state of message bad; w1's are found
// beside it.
func unstorableReceiptKey(t *testing.T, s store.Store, bad string) {
	t.Helper()
	has, err := s.HasReceipts(ctx(t), []store.ReceiptKey{{MessageID: bad, AccountID: "acc1", Type: wamux.ReceiptRead},
		{MessageID: "w1", AccountID: "acc1", Type: wamux.ReceiptRead}})
	must(t, err)
	if fmt.Sprint(has) != "[false true]" {
		t.Errorf("HasReceipts(%q, w1) = %v, want [false true]", bad, has)
	}
	st, err := s.GetStates(ctx(t), []store.StateKey{{AccountID: "acc1", MessageID: bad}, {AccountID: "acc1", MessageID: "w1"}})
	must(t, err)
	if len(st) != 1 {
		t.Errorf("GetStates(%q, w1) = %v, want w1 only", bad, st)
	}
	rs, err := s.ListReceipts(ctx(t), "acc1", bad)
	must(t, err)
	if len(rs) != 0 {
		t.Errorf("ListReceipts(%q) = %v, want none", bad, rs)
	}
}

// unstorableAccountKey: no account, owner or sequence state is named bad.
func unstorableAccountKey(t *testing.T, s store.Store, bad string) {
	t.Helper()
	_, err := s.GetAccount(ctx(t), bad)
	wantCode(t, err, wamux.ENotFound)
	_, err = s.GetAccountByPhoneNumberID(ctx(t), bad)
	wantCode(t, err, wamux.ENotFound)
	burst := 2
	_, err = s.UpdateAccount(ctx(t), bad, store.AccountPatch{Burst: &burst})
	wantCode(t, err, wamux.ENotFound)
	_, err = s.GetOwner(ctx(t), bad)
	wantCode(t, err, wamux.ENotFound)
	moves, err := s.ListOwnerMoves(ctx(t), bad)
	must(t, err)
	if len(moves) != 0 {
		t.Errorf("ListOwnerMoves(%q) = %v, want none", bad, moves)
	}
	seq, err := s.GetSeq(ctx(t), bad)
	must(t, err)
	if seq.NextSeq != 1 {
		t.Errorf("GetSeq(%q) = %+v, want a fresh state", bad, seq)
	}
}

// unstorableListFilter: a filter naming bad matches nothing, and the rest
// of the filter still matches.
func unstorableListFilter(t *testing.T, s store.Store, bad string) {
	t.Helper()
	for _, f := range []store.MessageFilter{{AccountID: bad}, {Statuses: []wamux.Status{wamux.Status(bad)}}} {
		ms, err := s.ListMessages(ctx(t), f)
		must(t, err)
		if len(ms) != 0 {
			t.Errorf("ListMessages(%+v) = %v, want none", f, ms)
		}
	}
	ms, err := s.ListMessages(ctx(t), store.MessageFilter{Statuses: []wamux.Status{wamux.Status(bad), wamux.StatusQueued}})
	must(t, err)
	if len(ms) != 1 {
		t.Errorf("ListMessages(%q or queued) = %v, want m1", bad, ms)
	}
}

func edgeInvalidUTF8(t *testing.T, s store.Store) {
	id := "m\xff\xfe"
	_, err := s.InsertMessages(ctx(t), []wamux.Message{testMessage(id, "acc1", 0, "h")})
	// A store may refuse it (PostgreSQL does), but only as invalid
	// input; one that keeps it finds it by every lookup.
	if err != nil && wamux.ErrorCode(err) != wamux.EInvalid {
		t.Errorf("InsertMessages with invalid UTF-8: %v, want success or invalid", err)
	}
	if err == nil {
		_, gerr := s.GetMessage(ctx(t), id)
		f, ferr := s.FindMessages(ctx(t), nil, []string{id})
		if gerr == nil && ferr == nil && len(f) != 1 {
			t.Errorf("FindMessages misses msg_id %q that GetMessage finds", id)
		}
		_, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: id, WAMID: "wamid.\xff", Status: wamux.StatusAccepted})
		must(t, err)
		f, ferr = s.FindMessages(ctx(t), []string{"wamid.\xff"}, nil)
		if ferr == nil && len(f) != 1 {
			t.Errorf("FindMessages misses wamid %q that UpdateMessage stored", "wamid.\xff")
		}
		// Nor may an invalid id match another message's valid one.
		wantOutcome(t, insertOne(t, s, testMessage("m\uFFFD", "acc1", 0, "h")), store.Inserted, "")
		f, ferr = s.FindMessages(ctx(t), nil, []string{"m\xff"})
		if ferr == nil && len(f) != 0 {
			t.Errorf("FindMessages(msg_id %q) = %q, want none (false match)", "m\xff", f[0].ID)
		}
	}
}
