package storetest

import (
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// testApplySeq: the status changes of a reorder-buffer step and the new
// sequence state land together, or not at all.
func testApplySeq(t *testing.T, s store.Store) {
	a, b, c := testMessage("as-1", "acc1", 1, "h1"), testMessage("as-2", "acc1", 2, "h2"), testMessage("as-3", "acc1", 3, "h3")
	for _, m := range []*wamux.Message{&a, &b, &c} {
		m.Status = wamux.StatusWaitingSeq
	}
	if _, err := s.InsertMessages(ctx(t), []wamux.Message{a, b, c}); err != nil {
		t.Fatal(err)
	}
	waiting := []wamux.Status{wamux.StatusWaitingSeq}
	res, err := s.ApplySeq(ctx(t), store.SeqState{AccountID: "acc1", NextSeq: 3, GapsSkipped: 1}, []store.MessageUpdate{
		{MsgID: "as-1", From: waiting, Status: wamux.StatusQueued},
		{MsgID: "as-2", From: waiting, Status: wamux.StatusHeld},
		{MsgID: "as-3", From: []wamux.Status{wamux.StatusSent}, Status: wamux.StatusQueued}, // precondition fails
	})
	must(t, err)
	if len(res) != 3 || !res[0] || !res[1] || res[2] {
		t.Fatalf("ApplySeq results %v, want [true true false]", res)
	}
	for id, want := range map[string]wamux.Status{"as-1": wamux.StatusQueued, "as-2": wamux.StatusHeld, "as-3": wamux.StatusWaitingSeq} {
		m, err := s.GetMessage(ctx(t), id)
		must(t, err)
		if m.Status != want {
			t.Fatalf("%s is %s, want %s", id, m.Status, want)
		}
	}
	st, err := s.GetSeq(ctx(t), "acc1")
	must(t, err)
	if st.NextSeq != 3 || st.GapsSkipped != 1 {
		t.Fatalf("seq %+v, want NextSeq 3 GapsSkipped 1", st)
	}

	// An update naming an unknown message fails the whole step: neither
	// the other status nor the sequence state changes.
	_, err = s.ApplySeq(ctx(t), store.SeqState{AccountID: "acc1", NextSeq: 9}, []store.MessageUpdate{
		{MsgID: "as-3", From: waiting, Status: wamux.StatusQueued},
		{MsgID: "no-such-message", Status: wamux.StatusQueued},
	})
	wantCode(t, err, wamux.ENotFound)
	m, err := s.GetMessage(ctx(t), "as-3")
	must(t, err)
	if m.Status != wamux.StatusWaitingSeq {
		t.Fatalf("a failed step changed as-3 to %s", m.Status)
	}
	if st, _ := s.GetSeq(ctx(t), "acc1"); st.NextSeq != 3 {
		t.Fatalf("a failed step moved NextSeq to %d", st.NextSeq)
	}
	_, err = s.ApplySeq(ctx(t), store.SeqState{}, nil)
	wantCode(t, err, wamux.EInvalid)
}
