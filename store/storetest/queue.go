package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// testQueue checks ListQueue's three orders and CountQueued: they are what
// the gateway loads its queues from a window at a time, so a wrong order
// reorders messages and a missing one is never sent.
func testQueue(t *testing.T, s store.Store) {
	msg := func(id, to string, p wamux.Priority, seq int64, st wamux.Status) wamux.Message {
		m := testMessage(id, "acc", seq, "h-"+id)
		m.To, m.Priority, m.Status = to, p, st
		return m
	}
	queued := wamux.StatusQueued
	// Two inserts; the second holds a P0 that must come first among the
	// plain messages and seqs given out of order.
	first := []wamux.Message{
		msg("a1", "+1", wamux.P1, 0, queued),
		msg("a2", "+2", wamux.P2, 0, queued),
		msg("a3", "+1", wamux.P1, 0, queued),
		msg("s3", "+1", wamux.P1, 3, queued),
		msg("w9", "+1", wamux.P1, 9, wamux.StatusWaitingSeq),
		msg("u1", "+1", wamux.P1, 0, queued), // becomes unknown below
	}
	must(t, insertAll(t, s, first))
	nextMilli(t)
	second := []wamux.Message{
		msg("b1", "+3", wamux.P1, 0, queued),
		msg("b0", "+1", wamux.P0, 0, queued),
		msg("s1", "+2", wamux.P0, 1, queued),
		msg("s2", "+1", wamux.P1, 2, queued),
	}
	must(t, insertAll(t, s, second))
	other := msg("x1", "+1", wamux.P0, 0, queued)
	other.AccountID = "other"
	must(t, insertAll(t, s, []wamux.Message{other}))
	if ok := update(t, s, store.MessageUpdate{MsgID: "u1", Status: wamux.StatusUnknown}); !ok {
		t.Fatal("update u1 to unknown did not apply")
	}

	list := func(f store.QueueFilter) []string {
		t.Helper()
		f.AccountID = "acc"
		got, err := s.ListQueue(ctx(t), f)
		must(t, err)
		ids := make([]string, len(got))
		for i, m := range got {
			if m.AccountID != "acc" || m.Status != wamux.StatusQueued {
				t.Fatalf("ListQueue(%+v) returned %s of %s in %s", f, m.ID, m.AccountID, m.Status)
			}
			ids[i] = m.ID
		}
		return ids
	}
	check := func(what string, got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
	check("plain", list(store.QueueFilter{}), []string{"b0", "a1", "a3", "b1", "a2"})
	check("plain, limit 2", list(store.QueueFilter{Limit: 2}), []string{"b0", "a1"})
	check("plain, except +1", list(store.QueueFilter{ExceptRecipients: []string{"+1", "+9"}}), []string{"b1", "a2"})
	check("sequenced", list(store.QueueFilter{Sequenced: true}), []string{"s1", "s2", "s3"})
	check("sequenced, except +2", list(store.QueueFilter{Sequenced: true, ExceptRecipients: []string{"+2"}}), []string{"s2", "s3"})
	check("recipient +1", list(store.QueueFilter{Recipient: "+1"}), []string{"a1", "a3", "s3", "b0", "s2"})
	check("recipient +1, limit 3", list(store.QueueFilter{Recipient: "+1", Limit: 3}), []string{"a1", "a3", "s3"})
	check("recipient nobody", list(store.QueueFilter{Recipient: "+404"}), nil)

	counts, err := s.CountQueued(ctx(t), "acc")
	must(t, err)
	if want := [3]int{2, 5, 1}; counts != want {
		t.Fatalf("CountQueued = %v, want %v", counts, want)
	}

	// A message that leaves queued leaves every list and count; one that
	// comes back (a throttled attempt requeued) is listed again in place.
	fromQueued := []wamux.Status{wamux.StatusQueued}
	if !update(t, s, store.MessageUpdate{MsgID: "a1", From: fromQueued, Status: wamux.StatusSending}) {
		t.Fatal("a1 to sending did not apply")
	}
	if !update(t, s, store.MessageUpdate{MsgID: "s2", From: fromQueued, Status: wamux.StatusAccepted}) {
		t.Fatal("s2 to accepted did not apply")
	}
	check("plain after a1 left", list(store.QueueFilter{}), []string{"b0", "a3", "b1", "a2"})
	check("sequenced after s2 left", list(store.QueueFilter{Sequenced: true}), []string{"s1", "s3"})
	if !update(t, s, store.MessageUpdate{MsgID: "a1", From: []wamux.Status{wamux.StatusSending}, Status: wamux.StatusQueued}) {
		t.Fatal("a1 back to queued did not apply")
	}
	check("plain after a1 came back", list(store.QueueFilter{}), []string{"b0", "a1", "a3", "b1", "a2"})
	// A message moved to another account leaves this one's queue.
	if !update(t, s, store.MessageUpdate{MsgID: "a3", From: fromQueued, Status: wamux.StatusQueued, AccountID: "other"}) {
		t.Fatal("a3 move did not apply")
	}
	check("recipient +1 after a3 moved", list(store.QueueFilter{Recipient: "+1"}), []string{"a1", "s3", "b0"})
	counts, err = s.CountQueued(ctx(t), "acc")
	must(t, err)
	if want := [3]int{2, 3, 1}; counts != want {
		t.Fatalf("CountQueued after changes = %v, want %v", counts, want)
	}
	if counts, err = s.CountQueued(ctx(t), "nobody"); err != nil || counts != [3]int{} {
		t.Fatalf("CountQueued of an account without messages = %v, %v", counts, err)
	}
}

// testQueueLarge checks that a queue read a window at a time, each window
// leaving out nothing it has not already returned, sees every message once
// in order: 2,500 messages stored by 5 inserts, read 300 at a time.
func testQueueLarge(t *testing.T, s store.Store) {
	const n, per = 2500, 500
	var want []string
	for b := 0; b < n/per; b++ {
		batch := make([]wamux.Message, per)
		for i := range batch {
			id := fmt.Sprintf("m%05d", b*per+i)
			m := testMessage(id, "acc", 0, "h-"+id)
			m.To, m.Priority = fmt.Sprintf("+%d", i%37), wamux.P1
			batch[i] = m
			want = append(want, id)
		}
		must(t, insertAll(t, s, batch))
	}
	var got []string
	for len(got) < n {
		ms, err := s.ListQueue(ctx(t), store.QueueFilter{AccountID: "acc", Limit: 300})
		must(t, err)
		if len(ms) == 0 {
			t.Fatalf("queue empty after %d of %d messages", len(got), n)
		}
		for _, m := range ms {
			got = append(got, m.ID)
			if !update(t, s, store.MessageUpdate{MsgID: m.ID, From: []wamux.Status{wamux.StatusQueued}, Status: wamux.StatusSending}) {
				t.Fatalf("%s was listed but is not queued", m.ID)
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("messages read a window at a time are out of order")
	}
}

func insertAll(t *testing.T, s store.Store, ms []wamux.Message) error {
	t.Helper()
	res, err := s.InsertMessages(ctx(t), ms)
	if err != nil {
		return err
	}
	for i, r := range res {
		if r.Outcome != store.Inserted {
			return fmt.Errorf("message %s: %v", ms[i].ID, r.Outcome)
		}
	}
	return nil
}
