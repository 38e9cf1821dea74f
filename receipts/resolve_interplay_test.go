package receipts_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/store"
)

// storeMsg stores one outbound message of account acc in status st with
// wamid (may be empty).
func storeMsg(t *testing.T, s store.Store, id, acc string, st wamux.Status, wamid string) {
	t.Helper()
	ctx := context.Background()
	m := wamux.Message{ID: id, BizType: "otp", AccountID: acc, To: "+491", Type: "text",
		Payload: []byte(`{"body":"x"}`), ContentHash: id, Status: wamux.StatusQueued}
	if _, err := s.InsertMessages(ctx, []wamux.Message{m}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateMessage(ctx, store.MessageUpdate{MsgID: id, Status: st, WAMID: wamid}); err != nil {
		t.Fatal(err)
	}
}

func getMsg(t *testing.T, s store.Store, id string) wamux.Message {
	t.Helper()
	m, err := s.GetMessage(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The send of m1 timed out (unknown). An agent's receipt (no callback
// data) reports wA delivered: no message has wA, so the state waits. Then
// Meta's webhook for the same message arrives, a weaker "sent" carrying
// biz_opaque_callback_data=m1. It does not change the merged state, but it
// names m1, so it must resolve it: otherwise m1 stays unknown and the
// compensator resends a message a status proved accepted.
func TestCallbackOnWeakerStatusResolvesUnknown(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			storeMsg(t, st, "m1", "acc1", wamux.StatusUnknown, "")
			p := startPipeline(t, receipts.Config{Store: st})
			ingest(t, p, rcpt("acc1", "wA", wamux.ReceiptDelivered, 2)) // agent: no callback
			flush(t, p)
			sent := rcpt("acc1", "wA", wamux.ReceiptSent, 1)
			sent.CallbackData = "m1"
			if _, err := p.Ingest(context.Background(), "webhook", []wamux.Receipt{sent}); err != nil {
				t.Fatal(err)
			}
			flush(t, p)
			m := getMsg(t, st, "m1")
			if m.Status != wamux.StatusDelivered || m.WAMID != "wA" {
				t.Fatalf("m1 = %s wamid %q, want delivered wamid wA: a status naming the unknown message did not resolve it", m.Status, m.WAMID)
			}
		})
	}
}

// The compensator gave up on m1 ("outcome still unknown after N attempts"
// → failed, no wamid). A late delivered status naming m1 in its callback
// data proves it arrived, and delivered beats failed: m1 adopts the wamid
// and becomes delivered.
func TestDeliveredBeatsCompensationGiveUp(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			storeMsg(t, st, "m1", "acc1", wamux.StatusUnknown, "")
			why := "outcome still unknown after 8 attempts"
			if ok, err := st.UpdateMessage(context.Background(), store.MessageUpdate{MsgID: "m1",
				From: []wamux.Status{wamux.StatusUnknown}, Status: wamux.StatusFailed, LastError: &why}); err != nil || !ok {
				t.Fatalf("give up: %v %v", ok, err)
			}
			p := startPipeline(t, receipts.Config{Store: st})
			dl := rcpt("acc1", "wA", wamux.ReceiptDelivered, 2)
			dl.CallbackData = "m1"
			if _, err := p.Ingest(context.Background(), "webhook", []wamux.Receipt{dl}); err != nil {
				t.Fatal(err)
			}
			flush(t, p)
			m := getMsg(t, st, "m1")
			if m.Status != wamux.StatusDelivered || m.WAMID != "wA" {
				t.Fatalf("m1 = %s wamid %q, want delivered wamid wA: marked failed although delivered", m.Status, m.WAMID)
			}
		})
	}
}

// gatedFind lets the test act between the pipeline's FindMessages and its
// UpdateMessage calls (real store underneath).
type gatedFind struct {
	store.Store
	found   chan struct{}
	once    sync.Once
	release chan struct{}
}

func (g *gatedFind) FindMessages(ctx context.Context, wamids, callbacks []string) ([]wamux.Message, error) {
	ms, err := g.Store.FindMessages(ctx, wamids, callbacks)
	g.once.Do(func() {
		close(g.found)
		<-g.release
	})
	return ms, err
}

// m1's first send (wA) had an unknown outcome and the compensator resends
// it (sending again). A late status of wA naming m1 is being resolved: the
// pipeline saw m1 sending without a wamid and decides to adopt wA.
// Meanwhile the resend's response is recorded (accepted, wamid wB). The
// adoption must not replace the wamid the dispatcher just recorded, or
// every later status of wB would be unmatched.
func TestAdoptionDoesNotOverwriteRecordedWAMID(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			ctx := context.Background()
			storeMsg(t, st, "m1", "acc1", wamux.StatusSending, "") // the resend is in flight
			g := &gatedFind{Store: st, found: make(chan struct{}), release: make(chan struct{})}
			p := startPipeline(t, receipts.Config{Store: g})
			dl := rcpt("acc1", "wA", wamux.ReceiptDelivered, 2)
			dl.CallbackData = "m1"
			if _, err := p.Ingest(ctx, "webhook", []wamux.Receipt{dl}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-g.found:
			case <-time.After(10 * time.Second):
				close(g.release)
				t.Fatal("the pipeline never looked the message up")
			}
			// The dispatcher records the resend's response.
			if ok, err := st.UpdateMessage(ctx, store.MessageUpdate{MsgID: "m1", From: []wamux.Status{wamux.StatusSending},
				Status: wamux.StatusAccepted, WAMID: "wB"}); err != nil || !ok {
				close(g.release)
				t.Fatalf("record wamid: %v %v", ok, err)
			}
			close(g.release)
			flush(t, p)
			m := getMsg(t, st, "m1")
			if m.WAMID != "wB" {
				t.Fatalf("m1 wamid = %q (status %s), want wB: the adoption replaced the wamid the dispatcher recorded", m.WAMID, m.Status)
			}
			// The recorded send's later status must still reach it.
			ingest(t, p, rcpt("acc1", "wB", wamux.ReceiptRead, 5))
			flush(t, p)
			if m := getMsg(t, st, "m1"); m.Status != wamux.StatusRead {
				t.Fatalf("m1 = %s wamid %q after wB read, want read", m.Status, m.WAMID)
			}
		})
	}
}

// A receipt posted for account acc2 (its agent) names a wamid that belongs
// to acc1's message: it must not move acc1's message (the state key and
// the dispatcher's early-status read are per account too).
func TestStatusOfOtherAccountByWAMIDIsNoMatch(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			storeMsg(t, st, "m1", "acc1", wamux.StatusSent, "wA")
			p := startPipeline(t, receipts.Config{Store: st})
			f := rcpt("acc2", "wA", wamux.ReceiptFailed, 2)
			f.ErrorCode = 131026
			ingest(t, p, f)
			flush(t, p)
			if m := getMsg(t, st, "m1"); m.Status != wamux.StatusSent {
				t.Fatalf("m1 of acc1 = %s (%s) after a receipt of acc2, want sent", m.Status, m.LastError)
			}
		})
	}
}

// m1 was accepted (wamid wA); a failed status (131049) marks it failed with
// the reason as last_error. A later delivered status proves it arrived and
// wins over failed: the message is delivered, and its last_error no longer
// names a failure that did not happen in the end (the failed status stays
// visible as the message's failed receipt time).
func TestDeliveredAfterFailedClearsLastError(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			storeMsg(t, st, "m1", "acc1", wamux.StatusAccepted, "wA")
			p := startPipeline(t, receipts.Config{Store: st})
			failed := rcpt("acc1", "wA", wamux.ReceiptFailed, 1)
			failed.ErrorCode, failed.ErrorTitle = 131049, "not delivered to maintain healthy ecosystem engagement"
			ingest(t, p, failed)
			flush(t, p)
			if m := getMsg(t, st, "m1"); m.Status != wamux.StatusFailed || m.LastError == "" {
				t.Fatalf("after the failed status m1 = %s, last_error %q; want failed with the reason", m.Status, m.LastError)
			}
			ingest(t, p, rcpt("acc1", "wA", wamux.ReceiptDelivered, 2))
			flush(t, p)
			m := getMsg(t, st, "m1")
			if m.Status != wamux.StatusDelivered {
				t.Fatalf("m1 = %s, want delivered: delivered beats failed", m.Status)
			}
			if m.LastError != "" {
				t.Fatalf("m1 is delivered but keeps last_error %q from the failed status it overrode", m.LastError)
			}
		})
	}
}
