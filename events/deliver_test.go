package events_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/events"
	"github.com/wamux/wamux/internal/testwait"
)

var lifecycle = []wamux.Status{wamux.StatusAccepted, wamux.StatusSent, wamux.StatusDelivered, wamux.StatusRead}

// A receiver that answers 500 for a while and then recovers gets every
// event, each message's in version order, and repeats only under the same
// webhook-id with the same body.
func TestReceiverDownThenUpGetsEveryEventInOrder(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	const failures = 40
	r := newReceiver(t, func(n int) int {
		if n < failures {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	m := startManager(t, st, managerOpts{})
	defer m.Stop()
	subscribe(t, m, r, wamux.EventMessageStatus)

	var ids []string
	for i := range 15 {
		ids = append(ids, fmt.Sprintf("m%02d", i))
	}
	addMessages(t, st, ids...)
	for _, s := range lifecycle {
		for _, id := range ids {
			progress(t, st, id, s)
		}
	}
	want := len(ids) * len(lifecycle)
	ds := r.waitFor("every event delivered", func(ds []delivery) bool { return len(accepted(ds)) == want })

	bodies := map[string]string{}
	lastVersion := map[string]float64{}
	statuses := map[string][]string{}
	for _, d := range ds {
		if b, ok := bodies[d.id]; ok && b != string(d.body) {
			t.Fatalf("event %s repeated with another body:\n%s\n%s", d.id, b, d.body)
		}
		bodies[d.id] = string(d.body)
		if d.status != http.StatusNoContent {
			continue
		}
		msg, v := d.data["msg_id"].(string), d.data["version"].(float64)
		if v <= lastVersion[msg] {
			t.Fatalf("message %s: version %v delivered after %v", msg, v, lastVersion[msg])
		}
		lastVersion[msg] = v
		statuses[msg] = append(statuses[msg], d.data["status"].(string))
	}
	for _, id := range ids {
		if got := fmt.Sprint(statuses[id]); got != "[accepted sent delivered read]" {
			t.Fatalf("message %s statuses delivered = %s", id, got)
		}
	}
	if len(ds) <= want {
		t.Fatalf("%d requests for %d events: the 500s were not retried", len(ds), want)
	}
}

// The body carries the message's fields, the previous status and, for a
// failure, the error parsed from the reason.
func TestStatusEventBody(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	r := newReceiver(t, func(int) int { return http.StatusOK })
	m := startManager(t, st, managerOpts{})
	defer m.Stop()
	subscribe(t, m, r)
	addMessages(t, st, "m1")
	progress(t, st, "m1", wamux.StatusAccepted)
	reason := wamux.FailureReason(131047, "Re-engagement message")
	if _, err := st.UpdateMessage(t.Context(), storeUpdate("m1", wamux.StatusFailed, reason)); err != nil {
		t.Fatal(err)
	}
	ds := r.waitFor("two events", func(ds []delivery) bool { return len(accepted(ds)) == 2 })
	last := ds[len(ds)-1]
	if last.typ != "message.status" || last.data["status"] != "failed" || last.data["previous_status"] != "accepted" ||
		last.data["to"] != "15550001" || last.data["biz_type"] != "otp" || last.data["wamid"] != "wamid.m1" {
		t.Fatalf("failed event = %s", last.body)
	}
	e, _ := last.data["error"].(map[string]any)
	if e == nil || e["code"] != float64(131047) || e["title"] != "Re-engagement message" {
		t.Fatalf("error = %v", last.data["error"])
	}
	if ds[0].data["previous_status"] != nil {
		t.Fatalf("first event's previous_status = %v, want null", ds[0].data["previous_status"])
	}
}

// 410 Gone disables the subscription; nothing more is sent to it.
func TestGoneDisablesSubscription(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	r := newReceiver(t, func(int) int { return http.StatusGone })
	m := startManager(t, st, managerOpts{})
	defer m.Stop()
	s := subscribe(t, m, r)
	addMessages(t, st, "m1", "m2")
	progress(t, st, "m1", wamux.StatusAccepted)
	r.waitFor("a delivery", func(ds []delivery) bool { return len(ds) > 0 })
	testwait.For(t, "the subscription disabled", 10*time.Second, func() bool {
		got, err := m.Get(t.Context(), s.ID)
		return err == nil && got.State == wamux.SubscriptionDisabled && got.StateReason != ""
	})
	n := len(r.deliveries())
	progress(t, st, "m2", wamux.StatusAccepted)
	// Another subscription sees m2's event: by then the disabled one had
	// its chance to send too.
	r2 := newReceiver(t, func(int) int { return http.StatusOK })
	subscribe(t, m, r2)
	progress(t, st, "m2", wamux.StatusSent)
	r2.waitFor("the other subscription's event", func(ds []delivery) bool { return len(accepted(ds)) == 1 })
	if got := len(r.deliveries()); got != n {
		t.Fatalf("a disabled subscription got %d more requests", got-n)
	}
}

// A delivery failing for the retry window marks the subscription failing;
// made active again, it delivers what was kept.
func TestFailingSubscriptionKeepsEventsForReactivation(t *testing.T) {
	st := openStore(t, t.TempDir())
	defer st.Close()
	up := make(chan struct{})
	r := newReceiver(t, func(int) int {
		select {
		case <-up:
			return http.StatusOK
		default:
			return http.StatusServiceUnavailable
		}
	})
	m := startManager(t, st, managerOpts{retryWindow: 30 * time.Millisecond})
	defer m.Stop()
	s := subscribe(t, m, r)
	addMessages(t, st, "m1")
	progress(t, st, "m1", wamux.StatusAccepted, wamux.StatusSent)
	testwait.For(t, "the subscription failing", 10*time.Second, func() bool {
		got, err := m.Get(t.Context(), s.ID)
		return err == nil && got.State == wamux.SubscriptionFailing
	})
	// The failing delivery is kept; the second event is kept too, queued
	// or still after the subscription's cursor when it stopped.
	if n, _, err := m.Backlog(t.Context(), s.ID); err != nil || n < 1 {
		t.Fatalf("backlog of a failing subscription = %d (%v), want its failed event kept", n, err)
	}
	close(up)
	active := wamux.SubscriptionActive
	if _, err := m.Update(t.Context(), s.ID, events.Patch{State: &active}); err != nil {
		t.Fatal(err)
	}
	r.waitFor("both events after reactivation", func(ds []delivery) bool { return len(accepted(ds)) == 2 })
}

func storeUpdate(id string, s wamux.Status, reason string) storeMessageUpdate {
	return storeMessageUpdate{MsgID: id, Status: s, LastError: &reason}
}
