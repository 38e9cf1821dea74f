package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/store"
)

func testEvents(t *testing.T, newStore NewStore) {
	t.Run("MessageStatusChanges", func(t *testing.T) { testMessageStatusEvents(t, newStore(t)) })
	t.Run("AccountState", func(t *testing.T) { testAccountStateEvents(t, newStore(t)) })
	t.Run("Inbound", func(t *testing.T) { testInboundEvents(t, newStore(t)) })
	t.Run("FeedPaging", func(t *testing.T) { testEventFeedPaging(t, newStore(t)) })
	t.Run("Subscriptions", func(t *testing.T) { testSubscriptions(t, newStore(t)) })
	t.Run("Deliveries", func(t *testing.T) { testDeliveries(t, newStore(t)) })
	t.Run("Prune", func(t *testing.T) { testPruneEvents(t, newStore(t)) })
}

// allEvents reads the whole feed once at least want events are readable:
// a backend may list an event only some time after its commit (PostgreSQL
// waits for the transactions that began before it to end).
func allEvents(t *testing.T, s store.Store, want int) []wamux.Event {
	t.Helper()
	return eventsAfter(t, s, "", want)
}

// eventsAfter reads the feed after cursor, in pages of three, once at
// least want events are readable.
func eventsAfter(t *testing.T, s store.Store, cursor string, want int) []wamux.Event {
	t.Helper()
	var out []wamux.Event
	testwait.For(t, fmt.Sprintf("%d events in the feed", want), 10*time.Second, func() bool {
		out = nil
		c := cursor
		for {
			es, next, err := s.ListEvents(ctx(t), c, 3)
			must(t, err)
			if len(es) == 0 {
				if next != c {
					t.Fatalf("empty page moved the cursor from %q to %q", c, next)
				}
				return len(out) >= want
			}
			out = append(out, es...)
			c = next
		}
	})
	return out
}

func update(t *testing.T, s store.Store, u store.MessageUpdate) bool {
	t.Helper()
	ok, err := s.UpdateMessage(ctx(t), u)
	must(t, err)
	return ok
}

func testMessageStatusEvents(t *testing.T, s store.Store) {
	m := testMessage("m1", "acc1", 7, "h1")
	m.Status, m.To, m.BizType = wamux.StatusQueued, "15550001", "otp"
	insertOne(t, s, m)
	update(t, s, store.MessageUpdate{MsgID: "m1", Status: wamux.StatusSending, AttemptsDelta: 1})
	if es := allEvents(t, s, 0); len(es) != 0 {
		t.Fatalf("queued and sending are inside the gateway, got events %+v", es)
	}
	update(t, s, store.MessageUpdate{MsgID: "m1", From: []wamux.Status{wamux.StatusSending}, Status: wamux.StatusAccepted, WAMID: "wamid.1"})
	update(t, s, store.MessageUpdate{MsgID: "m1", From: []wamux.Status{wamux.StatusAccepted}, Status: wamux.StatusSent})
	// A refused compare-and-set and a repeat of the same status change nothing.
	if update(t, s, store.MessageUpdate{MsgID: "m1", From: []wamux.Status{wamux.StatusQueued}, Status: wamux.StatusDropped}) {
		t.Fatal("compare-and-set from queued applied to a sent message")
	}
	update(t, s, store.MessageUpdate{MsgID: "m1", Status: wamux.StatusSent})
	reason := "provider reported failure (code 131026): Message undeliverable"
	update(t, s, store.MessageUpdate{MsgID: "m1", Status: wamux.StatusFailed, LastError: &reason})

	es := allEvents(t, s, 3)
	want := []struct{ status, previous string }{{"accepted", ""}, {"sent", "accepted"}, {"failed", "sent"}}
	if len(es) != len(want) {
		t.Fatalf("events = %+v, want %d", es, len(want))
	}
	for i, e := range es {
		if e.Type != wamux.EventMessageStatus || e.Status != want[i].status || e.PreviousStatus != want[i].previous {
			t.Fatalf("event %d = %s %s←%s, want %+v", i, e.Type, e.Status, e.PreviousStatus, want[i])
		}
		if e.MsgID != "m1" || e.AccountID != "acc1" || e.WAMID != "wamid.1" || e.To != "15550001" || e.BizType != "otp" || e.ClientSeq != 7 {
			t.Fatalf("event %d fields = %+v", i, e)
		}
		if i > 0 && e.ID <= es[i-1].ID {
			t.Fatalf("versions do not grow: %d after %d", e.ID, es[i-1].ID)
		}
		wantUTC(t, "event CreatedAt", e.CreatedAt)
	}
	if es[2].Detail != reason {
		t.Fatalf("failed event detail = %q, want the last error", es[2].Detail)
	}

	// A message stored in a reported status has its event from the start;
	// a held message (a sequencing step) too.
	d := testMessage("m2", "acc1", 0, "h2")
	d.Status = wamux.StatusDropped
	insertOne(t, s, d)
	h := testMessage("m3", "acc1", 9, "h3")
	h.Status = wamux.StatusWaitingSeq
	insertOne(t, s, h)
	_, err := s.ApplySeq(ctx(t), store.SeqState{AccountID: "acc1", NextSeq: 10},
		[]store.MessageUpdate{{MsgID: "m3", From: []wamux.Status{wamux.StatusWaitingSeq}, Status: wamux.StatusHeld}})
	must(t, err)
	es = allEvents(t, s, 5)
	if len(es) != 5 || es[3].MsgID != "m2" || es[3].Status != "dropped" || es[4].MsgID != "m3" || es[4].Status != "held" {
		t.Fatalf("events after insert and ApplySeq = %+v", es[3:])
	}
}

func testAccountStateEvents(t *testing.T, s store.Store) {
	_, err := s.CreateAccount(ctx(t), testAccount("acc1", "1001"))
	must(t, err)
	rate := 5.0
	_, err = s.UpdateAccount(ctx(t), "acc1", store.AccountPatch{RatePerSec: &rate})
	must(t, err)
	if es := allEvents(t, s, 0); len(es) != 0 {
		t.Fatalf("a rate change is no state change, got %+v", es)
	}
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	why := "provider throttled (130429)"
	_, err = s.UpdateAccount(ctx(t), "acc1", store.AccountPatch{CooldownUntil: &until, StateReason: &why})
	must(t, err)
	disabled := wamux.AccountDisabled
	why2 := "access token rejected (190)"
	_, err = s.UpdateAccount(ctx(t), "acc1", store.AccountPatch{State: &disabled, StateReason: &why2})
	must(t, err)
	active := wamux.AccountActive
	var zero time.Time
	_, err = s.UpdateAccount(ctx(t), "acc1", store.AccountPatch{State: &active, CooldownUntil: &zero})
	must(t, err)

	es := allEvents(t, s, 3)
	want := []struct{ now, was, reason string }{
		{"cooldown", "active", why}, {"disabled", "cooldown", why2}, {"active", "disabled", ""}}
	if len(es) != len(want) {
		t.Fatalf("events = %+v, want %d", es, len(want))
	}
	for i, e := range es {
		if e.Type != wamux.EventAccountState || e.AccountID != "acc1" || e.Status != want[i].now ||
			e.PreviousStatus != want[i].was || e.Detail != want[i].reason {
			t.Fatalf("event %d = %+v, want %+v", i, e, want[i])
		}
	}
	if !es[0].Until.Equal(until) {
		t.Fatalf("cooldown event until = %v, want %v", es[0].Until, until)
	}
}

func testInboundEvents(t *testing.T, s store.Store) {
	data := `{"account_id":"acc1","from":"15550001","wamid":"wamid.in1","type":"text","text":{"body":"hi"}}`
	in := []store.InboundMessage{
		{AccountID: "acc1", WAMID: "wamid.in1", Type: "text", From: "15550001", SentAt: time.Now(), Data: []byte(data)},
		{AccountID: "acc1", WAMID: "wamid.in2", Type: "text", SentAt: time.Now()},
	}
	n, err := s.AddInboundMessages(ctx(t), in)
	must(t, err)
	if n != 2 {
		t.Fatalf("added %d, want 2", n)
	}
	n, err = s.AddInboundMessages(ctx(t), in[:1])
	must(t, err)
	if n != 0 {
		t.Fatalf("a repeat added %d", n)
	}
	es := allEvents(t, s, 1)
	if len(es) != 1 || es[0].Type != wamux.EventMessageInbound || es[0].WAMID != "wamid.in1" || string(es[0].Data) != data {
		t.Fatalf("inbound events = %+v, want one with the data", es)
	}
}

func testEventFeedPaging(t *testing.T, s store.Store) {
	for i := range 7 {
		m := testMessage("p"+string(rune('a'+i)), "acc1", 0, "h")
		m.Status = wamux.StatusDropped
		insertOne(t, s, m)
	}
	es := allEvents(t, s, 7)
	if len(es) != 7 {
		t.Fatalf("paged feed has %d events, want 7", len(es))
	}
	for i, e := range es {
		if want := "p" + string(rune('a'+i)); e.MsgID != want {
			t.Fatalf("event %d is %s, want %s (commit order)", i, e.MsgID, want)
		}
	}
	page, next, err := s.ListEvents(ctx(t), es[4].Cursor, 10)
	must(t, err)
	if len(page) != 2 || page[0].ID != es[5].ID || next != es[6].Cursor {
		t.Fatalf("after event 5: %d events, next %q", len(page), next)
	}
	_, _, err = s.ListEvents(ctx(t), "not a cursor", 10)
	wantCode(t, err, wamux.EInvalid)

	c, err := s.EventCursorAt(ctx(t), es[0].CreatedAt)
	must(t, err)
	page, _, err = s.ListEvents(ctx(t), c, 10)
	must(t, err)
	if len(page) == 0 || page[0].ID != es[0].ID {
		t.Fatalf("cursor at the first event's time does not start at it: %+v", page)
	}
	c, err = s.EventCursorAt(ctx(t), time.Now().Add(time.Hour))
	must(t, err)
	if page, _, err = s.ListEvents(ctx(t), c, 10); err != nil || len(page) != 0 {
		t.Fatalf("cursor at a future time lists %d events (%v)", len(page), err)
	}
}

func testSubscription(id string) wamux.Subscription {
	return wamux.Subscription{ID: id, URL: "https://example.com/hook", Events: []wamux.EventType{wamux.EventMessageStatus},
		AccountIDs: []string{"acc1", "acc2"}, Description: "crm", State: wamux.SubscriptionActive, Secret: "sealed-secret"}
}

func testSubscriptions(t *testing.T, s store.Store) {
	m := testMessage("before", "acc1", 0, "h")
	m.Status = wamux.StatusDropped
	insertOne(t, s, m)
	allEvents(t, s, 1) // readable, so committed before the subscription's head
	sub, err := s.CreateSubscription(ctx(t), testSubscription("sub1"))
	must(t, err)
	if sub.URL != "https://example.com/hook" || len(sub.Events) != 1 || len(sub.AccountIDs) != 2 || sub.Secret != "sealed-secret" {
		t.Fatalf("created = %+v", sub)
	}
	wantUTC(t, "CreatedAt", sub.CreatedAt)
	if es, _, err := s.ListEvents(ctx(t), sub.Cursor, 10); err != nil || len(es) != 0 {
		t.Fatalf("a new subscription's cursor is not at the head: %d events after it (%v)", len(es), err)
	}
	_, err = s.CreateSubscription(ctx(t), testSubscription("sub1"))
	wantCode(t, err, wamux.EConflict)
	bad := testSubscription("sub2")
	bad.Events = []wamux.EventType{"message.nope"}
	_, err = s.CreateSubscription(ctx(t), bad)
	wantCode(t, err, wamux.EInvalid)

	all := []wamux.EventType{wamux.EventAny}
	none := []string{}
	failing := wamux.SubscriptionFailing
	why := "undelivered for 72h0m0s"
	got, err := s.UpdateSubscription(ctx(t), "sub1", store.SubscriptionPatch{Events: &all, AccountIDs: &none, State: &failing, StateReason: &why})
	must(t, err)
	if got.State != failing || got.StateReason != why || len(got.AccountIDs) != 0 || got.Events[0] != wamux.EventAny || got.URL != sub.URL {
		t.Fatalf("updated = %+v", got)
	}
	if !got.Matches(wamux.EventAccountState, "any") {
		t.Fatal("a subscription to * with no accounts does not match")
	}
	_, err = s.UpdateSubscription(ctx(t), "nope", store.SubscriptionPatch{State: &failing})
	wantCode(t, err, wamux.ENotFound)
	_, err = s.CreateSubscription(ctx(t), testSubscription("sub0"))
	must(t, err)
	list, err := s.ListSubscriptions(ctx(t))
	must(t, err)
	if len(list) != 2 || list[0].ID != "sub0" || list[1].ID != "sub1" {
		t.Fatalf("list = %v", list)
	}
	must(t, s.DeleteSubscription(ctx(t), "sub1"))
	wantCode(t, s.DeleteSubscription(ctx(t), "sub1"), wamux.ENotFound)
	_, err = s.GetSubscription(ctx(t), "sub1")
	wantCode(t, err, wamux.ENotFound)
}

func testDeliveries(t *testing.T, s store.Store) {
	sub, err := s.CreateSubscription(ctx(t), testSubscription("sub1"))
	must(t, err)
	// m1 gets two events (accepted, sent), m2 one.
	for _, id := range []string{"m1", "m2"} {
		m := testMessage(id, "acc1", 0, "h"+id)
		m.Status = wamux.StatusSending
		insertOne(t, s, m)
		update(t, s, store.MessageUpdate{MsgID: id, Status: wamux.StatusAccepted, WAMID: "wamid." + id})
	}
	update(t, s, store.MessageUpdate{MsgID: "m1", Status: wamux.StatusSent})
	es := eventsAfter(t, s, sub.Cursor, 3)
	head := es[len(es)-1].Cursor
	if len(es) != 3 {
		t.Fatalf("events = %d, want 3", len(es))
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	var ds []store.Delivery
	for _, e := range es {
		ds = append(ds, store.Delivery{EventID: e.ID, OrderKey: store.OrderKey(e), NextAt: now})
	}
	moved, err := s.EnqueueDeliveries(ctx(t), "sub1", "stale", head, ds)
	must(t, err)
	if moved {
		t.Fatal("enqueue from a stale cursor moved it")
	}
	moved, err = s.EnqueueDeliveries(ctx(t), "sub1", sub.Cursor, head, ds)
	must(t, err)
	if !moved {
		t.Fatal("enqueue from the current cursor did not move it")
	}
	if got, _ := s.GetSubscription(ctx(t), "sub1"); got.Cursor != head {
		t.Fatalf("cursor = %q, want %q", got.Cursor, head)
	}
	n, oldest, err := s.DeliveryBacklog(ctx(t), "sub1")
	must(t, err)
	if n != 3 || oldest.IsZero() {
		t.Fatalf("backlog = %d, %v", n, oldest)
	}

	due, err := s.DueDeliveries(ctx(t), "sub1", now, 10)
	must(t, err)
	// m1's sent waits behind its accepted.
	if len(due) != 2 || due[0].EventID != es[0].ID || due[1].EventID != es[1].ID {
		t.Fatalf("due = %+v, want m1's first and m2's events", due)
	}
	if due[0].Event.MsgID != "m1" || due[0].Event.Status != "accepted" || due[0].Event.WAMID != "wamid.m1" {
		t.Fatalf("due event = %+v", due[0].Event)
	}
	// m1's first fails and is retried later; m2's is delivered.
	retry := due[0]
	retry.Attempts, retry.NextAt, retry.FirstFailedAt, retry.LastError = 1, now.Add(time.Minute), now, "HTTP 500"
	must(t, s.SettleDeliveries(ctx(t), "sub1", []int64{due[1].EventID}, []store.Delivery{retry}))
	due, err = s.DueDeliveries(ctx(t), "sub1", now, 10)
	must(t, err)
	if len(due) != 0 {
		t.Fatalf("due before the retry time = %+v (m1's sent must wait for its accepted)", due)
	}
	due, err = s.DueDeliveries(ctx(t), "sub1", now.Add(time.Minute), 10)
	must(t, err)
	if len(due) != 1 || due[0].EventID != es[0].ID || due[0].Attempts != 1 || due[0].LastError != "HTTP 500" || !due[0].FirstFailedAt.Equal(now) {
		t.Fatalf("due at the retry time = %+v", due)
	}
	// Making the subscription active again makes everything due now.
	active := wamux.SubscriptionActive
	_, err = s.UpdateSubscription(ctx(t), "sub1", store.SubscriptionPatch{State: &active})
	must(t, err)
	due, err = s.DueDeliveries(ctx(t), "sub1", time.Now().Add(time.Second), 10)
	must(t, err)
	if len(due) != 1 || due[0].Attempts != 0 || !due[0].FirstFailedAt.IsZero() {
		t.Fatalf("due after reactivation = %+v", due)
	}
	must(t, s.SettleDeliveries(ctx(t), "sub1", []int64{es[0].ID}, nil))
	due, err = s.DueDeliveries(ctx(t), "sub1", time.Now().Add(time.Second), 10)
	must(t, err)
	if len(due) != 1 || due[0].EventID != es[2].ID {
		t.Fatalf("after m1's first was delivered, due = %+v, want its second", due)
	}
	// A repeat of a pending delivery keeps it as it is; deleting the
	// subscription removes its deliveries.
	_, err = s.EnqueueDeliveries(ctx(t), "sub1", head, head, ds[2:])
	must(t, err)
	if n, _, _ := s.DeliveryBacklog(ctx(t), "sub1"); n != 1 {
		t.Fatalf("backlog after a repeated enqueue = %d, want 1", n)
	}
	must(t, s.DeleteSubscription(ctx(t), "sub1"))
	if n, _, _ := s.DeliveryBacklog(ctx(t), "sub1"); n != 0 {
		t.Fatalf("backlog after delete = %d", n)
	}
}

func testPruneEvents(t *testing.T, s store.Store) {
	sub, err := s.CreateSubscription(ctx(t), testSubscription("sub1"))
	must(t, err)
	for _, id := range []string{"a", "b", "c"} {
		m := testMessage(id, "acc1", 0, "h"+id)
		m.Status = wamux.StatusDropped
		insertOne(t, s, m)
	}
	es := eventsAfter(t, s, sub.Cursor, 3)
	head := es[len(es)-1].Cursor
	var ds []store.Delivery
	for _, e := range es {
		ds = append(ds, store.Delivery{EventID: e.ID, OrderKey: store.OrderKey(e), NextAt: time.Now()})
	}
	_, err = s.EnqueueDeliveries(ctx(t), "sub1", sub.Cursor, head, ds)
	must(t, err)
	n, err := s.PruneEvents(ctx(t), time.Now().Add(time.Hour), 2)
	must(t, err)
	if n != 2 {
		t.Fatalf("pruned %d, want the limit 2", n)
	}
	if left := allEvents(t, s, 1); len(left) != 1 {
		t.Fatalf("%d events left, want 1", len(left))
	}
	if n, _, _ := s.DeliveryBacklog(ctx(t), "sub1"); n != 1 {
		t.Fatalf("deliveries left = %d, want 1 (those of pruned events go)", n)
	}
	n, err = s.PruneEvents(ctx(t), time.Now().Add(-time.Hour), 10)
	must(t, err)
	if n != 0 {
		t.Fatalf("pruned %d events newer than the limit", n)
	}
}
