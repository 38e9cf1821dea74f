package storetest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

func testMessage(id, account string, seq int64, hash string) wamux.Message {
	return wamux.Message{
		ID: id, BizType: "otp", AccountID: account, ClientSeq: seq, To: "+4917" + id,
		Priority: wamux.P0, Type: "text", Payload: []byte(`{"body":"` + id + `"}`),
		ContentHash: hash, Status: wamux.StatusQueued,
	}
}

// sameContent compares what the caller gave, not the store's stamps.
func sameContent(a, b wamux.Message) bool {
	return a.ID == b.ID && a.BizType == b.BizType && a.AccountID == b.AccountID && a.ClientSeq == b.ClientSeq &&
		a.To == b.To && a.Priority == b.Priority && a.Type == b.Type && bytes.Equal(a.Payload, b.Payload) &&
		a.ContentHash == b.ContentHash && a.Status == b.Status && a.WAMID == b.WAMID &&
		a.Attempts == b.Attempts && a.LastError == b.LastError
}

func insertOne(t *testing.T, s store.Store, m wamux.Message) store.InsertResult {
	t.Helper()
	res, err := s.InsertMessages(ctx(t), []wamux.Message{m})
	must(t, err)
	if len(res) != 1 {
		t.Fatalf("InsertMessages returned %d results for 1 message", len(res))
	}
	return res[0]
}

func wantOutcome(t *testing.T, r store.InsertResult, want store.InsertOutcome, existingID string) {
	t.Helper()
	if r.Outcome != want {
		t.Fatalf("outcome = %v, want %v", r.Outcome, want)
	}
	if want == store.Inserted {
		return
	}
	if r.Existing == nil || r.Existing.ID != existingID {
		t.Fatalf("Existing = %+v, want message %q", r.Existing, existingID)
	}
}

func getMessage(t *testing.T, s store.Store, id string) wamux.Message {
	t.Helper()
	m, err := s.GetMessage(ctx(t), id)
	must(t, err)
	return m
}

func testMessages(t *testing.T, newStore NewStore) {
	t.Run("InsertGet", func(t *testing.T) {
		s := newStore(t)
		in := testMessage("m1", "acc1", 7, "h1")
		in.Priority = wamux.P2
		wantOutcome(t, insertOne(t, s, in), store.Inserted, "")
		got := getMessage(t, s, "m1")
		if !sameContent(got, in) {
			t.Fatalf("GetMessage = %+v, want %+v", got, in)
		}
		wantUTC(t, "CreatedAt", got.CreatedAt)
		wantUTC(t, "UpdatedAt", got.UpdatedAt)
		noSeq := testMessage("m2", "acc1", 0, "h2")
		noSeq.Payload = nil
		wantOutcome(t, insertOne(t, s, noSeq), store.Inserted, "")
		if got := getMessage(t, s, "m2"); got.ClientSeq != 0 || len(got.Payload) != 0 {
			t.Fatalf("message without seq/payload = %+v", got)
		}
		_, err := s.GetMessage(ctx(t), "nope")
		wantCode(t, err, wamux.ENotFound)
		_, err = s.GetMessageByWAMID(ctx(t), "wamid.nope")
		wantCode(t, err, wamux.ENotFound)
	})
	t.Run("IdempotentByMsgID", func(t *testing.T) {
		s := newStore(t)
		orig := testMessage("m1", "acc1", 0, "h1")
		wantOutcome(t, insertOne(t, s, orig), store.Inserted, "")
		before := getMessage(t, s, "m1")

		repeat := orig
		repeat.To = "+000" // same hash: a retry, whatever else differs is ignored
		r := insertOne(t, s, repeat)
		wantOutcome(t, r, store.Duplicate, "m1")
		if !sameContent(*r.Existing, orig) {
			t.Fatalf("Existing = %+v, want the stored original", r.Existing)
		}
		other := testMessage("m1", "acc1", 0, "h-other")
		other.Payload = []byte(`{"body":"other"}`)
		r = insertOne(t, s, other)
		wantOutcome(t, r, store.Conflict, "m1")
		if r.Existing.ContentHash != "h1" {
			t.Fatalf("Existing hash = %q, want the stored h1", r.Existing.ContentHash)
		}
		after := getMessage(t, s, "m1")
		if !sameContent(after, before) || !after.UpdatedAt.Equal(before.UpdatedAt) {
			t.Fatalf("stored message changed by repeats: %+v → %+v", before, after)
		}
	})
	t.Run("UniqueClientSeq", func(t *testing.T) {
		s := newStore(t)
		wantOutcome(t, insertOne(t, s, testMessage("m1", "acc1", 5, "h1")), store.Inserted, "")
		r := insertOne(t, s, testMessage("m2", "acc1", 5, "h2"))
		wantOutcome(t, r, store.Conflict, "m1")
		_, err := s.GetMessage(ctx(t), "m2")
		wantCode(t, err, wamux.ENotFound)
		// Same seq on another account, and seq 0 (none) twice, are fine.
		wantOutcome(t, insertOne(t, s, testMessage("m3", "acc2", 5, "h3")), store.Inserted, "")
		wantOutcome(t, insertOne(t, s, testMessage("m4", "acc1", 0, "h4")), store.Inserted, "")
		wantOutcome(t, insertOne(t, s, testMessage("m5", "acc1", 0, "h5")), store.Inserted, "")
	})
	t.Run("BatchDecidesEach", func(t *testing.T) {
		s := newStore(t)
		wantOutcome(t, insertOne(t, s, testMessage("old", "acc1", 1, "h-old")), store.Inserted, "")
		batch := []wamux.Message{
			testMessage("n1", "acc1", 2, "h-n1"),
			testMessage("old", "acc1", 1, "h-old"),   // duplicate
			testMessage("old", "acc1", 1, "h-other"), // conflict by content
			testMessage("n2", "acc1", 1, "h-n2"),     // conflict by seq with "old"
			testMessage("n3", "acc1", 0, "h-n3"),
			testMessage("n1", "acc1", 2, "h-n1"), // repeat inside the batch
			testMessage("n4", "acc1", 2, "h-n4"), // seq taken by n1 in this batch
		}
		res, err := s.InsertMessages(ctx(t), batch)
		must(t, err)
		want := []struct {
			o  store.InsertOutcome
			id string
		}{
			{store.Inserted, ""}, {store.Duplicate, "old"}, {store.Conflict, "old"}, {store.Conflict, "old"},
			{store.Inserted, ""}, {store.Duplicate, "n1"}, {store.Conflict, "n1"},
		}
		if len(res) != len(want) {
			t.Fatalf("results = %d, want %d", len(res), len(want))
		}
		for i, w := range want {
			t.Run(fmt.Sprint(i), func(t *testing.T) { wantOutcome(t, res[i], w.o, w.id) })
		}
		all, err := s.ListMessages(ctx(t), store.MessageFilter{})
		must(t, err)
		if len(all) != 3 {
			t.Fatalf("stored %d messages, want old, n1, n3", len(all))
		}
	})
	t.Run("RepeatAfterBlockedCopy", func(t *testing.T) {
		// Two messages of one batch share a msg_id; the first is blocked by
		// another message's (account_id, client_seq), so the second is the
		// one stored: the results must say so, not the reverse.
		s := newStore(t)
		wantOutcome(t, insertOne(t, s, testMessage("y", "acc1", 1, "h-y")), store.Inserted, "")
		res, err := s.InsertMessages(ctx(t), []wamux.Message{
			testMessage("x", "acc1", 1, "h-x1"), testMessage("x", "acc1", 2, "h-x2"),
		})
		must(t, err)
		if len(res) != 2 || res[0].Outcome != store.Conflict || res[1].Outcome != store.Inserted {
			t.Fatalf("results = %+v, want conflict, inserted", res)
		}
		if e := res[0].Existing; e == nil || (e.ID != "y" && e.ID != "x") {
			t.Fatalf("Existing = %+v, want y (its seq) or x (its msg_id)", e)
		}
		if got := getMessage(t, s, "x"); got.ClientSeq != 2 || got.ContentHash != "h-x2" {
			t.Fatalf("stored x = seq %d hash %s, want the second copy", got.ClientSeq, got.ContentHash)
		}
	})
	t.Run("Update", func(t *testing.T) { testUpdateMessage(t, newStore(t)) })
	t.Run("List", func(t *testing.T) { testListMessages(t, newStore(t)) })
}

func testUpdateMessage(t *testing.T, s store.Store) {
	for _, id := range []string{"m1", "m2"} {
		wantOutcome(t, insertOne(t, s, testMessage(id, "acc1", 0, "h-"+id)), store.Inserted, "")
	}
	before := getMessage(t, s, "m1")
	nextMilli(t)
	errText := "timeout"
	ok, err := s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "m1", From: []wamux.Status{wamux.StatusQueued},
		Status: wamux.StatusSending, AttemptsDelta: 1, LastError: &errText})
	must(t, err)
	if !ok {
		t.Fatal("update from queued not applied")
	}
	got := getMessage(t, s, "m1")
	if got.Status != wamux.StatusSending || got.Attempts != 1 || got.LastError != "timeout" || got.WAMID != "" {
		t.Fatalf("after update = %+v", got)
	}
	if !got.UpdatedAt.After(before.UpdatedAt) || !got.CreatedAt.Equal(before.CreatedAt) {
		t.Fatalf("stamps: created %v→%v updated %v→%v", before.CreatedAt, got.CreatedAt, before.UpdatedAt, got.UpdatedAt)
	}

	// Compare-and-set: m1 is no longer queued.
	ok, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "m1", From: []wamux.Status{wamux.StatusQueued, wamux.StatusUnknown},
		Status: wamux.StatusDropped, AttemptsDelta: 5})
	must(t, err)
	if ok {
		t.Fatal("update applied although status was not in From")
	}
	if g := getMessage(t, s, "m1"); g.Status != wamux.StatusSending || g.Attempts != 1 {
		t.Fatalf("failed CAS changed the message: %+v", g)
	}

	ok, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "m1", From: []wamux.Status{wamux.StatusQueued, wamux.StatusSending},
		Status: wamux.StatusAccepted, WAMID: "wamid.1", AttemptsDelta: 1})
	must(t, err)
	if !ok {
		t.Fatal("update from sending not applied")
	}
	got = getMessage(t, s, "m1")
	if got.Status != wamux.StatusAccepted || got.WAMID != "wamid.1" || got.Attempts != 2 || got.LastError != "timeout" {
		t.Fatalf("after accept = %+v (LastError nil must keep it)", got)
	}
	byWAMID, err := s.GetMessageByWAMID(ctx(t), "wamid.1")
	must(t, err)
	if byWAMID.ID != "m1" {
		t.Fatalf("GetMessageByWAMID = %q, want m1", byWAMID.ID)
	}

	// Without From the update is unconditional; an empty WAMID keeps it.
	cleared := ""
	ok, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "m1", Status: wamux.StatusDelivered, LastError: &cleared})
	must(t, err)
	if !ok {
		t.Fatal("unconditional update not applied")
	}
	if g := getMessage(t, s, "m1"); g.Status != wamux.StatusDelivered || g.WAMID != "wamid.1" || g.LastError != "" {
		t.Fatalf("after deliver = %+v", g)
	}

	// Another message may not take the same wamid.
	_, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "m2", Status: wamux.StatusAccepted, WAMID: "wamid.1", AttemptsDelta: 1})
	wantCode(t, err, wamux.EConflict)
	if g := getMessage(t, s, "m2"); g.Status != wamux.StatusQueued || g.WAMID != "" || g.Attempts != 0 {
		t.Fatalf("conflicting update changed m2: %+v", g)
	}

	// Re-routing moves the message to another account.
	ok, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "m2", Status: wamux.StatusQueued, AccountID: "acc2"})
	must(t, err)
	if g := getMessage(t, s, "m2"); !ok || g.AccountID != "acc2" {
		t.Fatalf("re-routed message = %+v", g)
	}

	_, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "nope", Status: wamux.StatusSent})
	wantCode(t, err, wamux.ENotFound)
}

func testListMessages(t *testing.T, s store.Store) {
	// Inserted in reverse name order, one millisecond apart, so "oldest
	// first" and "by msg_id" disagree.
	for _, m := range []wamux.Message{
		testMessage("m5", "acc1", 0, "h"), testMessage("m4", "acc1", 0, "h"), testMessage("m3", "acc2", 0, "h"),
		testMessage("m2", "acc1", 0, "h"), testMessage("m1", "acc1", 0, "h"),
	} {
		wantOutcome(t, insertOne(t, s, m), store.Inserted, "")
		nextMilli(t)
	}
	_, err := s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "m4", Status: wamux.StatusHeld})
	must(t, err)
	// m6 moves on to a terminal status, which a store may keep out of the
	// index it lists queues from; asking for it must still find it.
	wantOutcome(t, insertOne(t, s, testMessage("m6", "acc1", 0, "h")), store.Inserted, "")
	_, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "m6", Status: wamux.StatusDelivered, WAMID: "wamid.m6"})
	must(t, err)
	ids := func(ms []wamux.Message) string {
		var out []string
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return fmt.Sprint(out)
	}
	cases := []struct {
		f    store.MessageFilter
		want string
	}{
		{store.MessageFilter{AccountID: "acc1", Statuses: []wamux.Status{wamux.StatusQueued}}, "[m5 m2 m1]"},
		{store.MessageFilter{AccountID: "acc1", Statuses: []wamux.Status{wamux.StatusQueued, wamux.StatusHeld}}, "[m5 m4 m2 m1]"},
		{store.MessageFilter{Statuses: []wamux.Status{wamux.StatusQueued}}, "[m5 m3 m2 m1]"},
		{store.MessageFilter{AccountID: "acc2"}, "[m3]"},
		{store.MessageFilter{AccountID: "acc1", Statuses: []wamux.Status{wamux.StatusQueued}, Limit: 2}, "[m5 m2]"},
		{store.MessageFilter{AccountID: "acc1", Statuses: []wamux.Status{wamux.StatusSent}}, "[]"},
		{store.MessageFilter{AccountID: "acc1", Statuses: []wamux.Status{wamux.StatusDelivered}}, "[m6]"},
		{store.MessageFilter{AccountID: "acc1", Statuses: []wamux.Status{wamux.StatusQueued, wamux.StatusDelivered}}, "[m5 m2 m1 m6]"},
		{store.MessageFilter{Statuses: []wamux.Status{wamux.StatusHeld, wamux.StatusDelivered}}, "[m4 m6]"},
	}
	for i, c := range cases {
		got, err := s.ListMessages(ctx(t), c.f)
		must(t, err)
		if ids(got) != c.want {
			t.Fatalf("case %d: ListMessages(%+v) = %s, want %s", i, c.f, ids(got), c.want)
		}
	}
	got, err := s.ListMessages(ctx(t), store.MessageFilter{AccountID: "acc2"})
	must(t, err)
	if !sameContent(got[0], testMessage("m3", "acc2", 0, "h")) {
		t.Fatalf("listed message = %+v", got[0])
	}
	// Messages stored in one call share their created_at: they are listed
	// in the order they were given (the order they were submitted, which
	// a restart rebuilds the queues in), not by msg_id.
	_, err = s.InsertMessages(ctx(t), []wamux.Message{testMessage("b3", "acc3", 0, "h"),
		testMessage("b1", "acc3", 0, "h"), testMessage("b2", "acc3", 0, "h")})
	must(t, err)
	got, err = s.ListMessages(ctx(t), store.MessageFilter{AccountID: "acc3", Statuses: []wamux.Status{wamux.StatusQueued}})
	must(t, err)
	if ids(got) != "[b3 b1 b2]" {
		t.Fatalf("one batch listed as %s, want [b3 b1 b2] (the order given)", ids(got))
	}
}
