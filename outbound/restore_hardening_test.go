package outbound_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/outbound"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
)

// recordingProvider counts provider calls per msg_id; with firstUnknown the
// first attempt of each message is answered "outcome unknown" without
// reaching the simulator (the request died before Meta saw it).
type recordingProvider struct {
	inner        outbound.Provider
	firstUnknown bool
	mu           sync.Mutex
	calls        map[string]int
}

func (p *recordingProvider) Send(ctx context.Context, dest cloudapi.Destination, msg wamux.Message) cloudapi.Result {
	p.mu.Lock()
	p.calls[msg.ID]++
	n := p.calls[msg.ID]
	p.mu.Unlock()
	if p.firstUnknown && n == 1 {
		return cloudapi.Result{Outcome: cloudapi.Unknown, Code: -1, Reason: "timeout"}
	}
	return p.inner.Send(ctx, dest, msg)
}

func (p *recordingProvider) count(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[id]
}

// TestRestartKeepsQuietPeriodForUnknownBehindQueued: a batch of two
// messages to one recipient (client msg_ids "m-b", then "m-a"); the first
// was with the provider when the process died. After the restart the
// unknown one must wait the quiet period before compensation resends it,
// wherever the store's order puts it (by msg_id "m-a" comes first), and
// "m-a", queued behind it, waits too.
func TestRestartKeepsQuietPeriodForUnknownBehindQueued(t *testing.T) {
	var rp *recordingProvider
	clk := fakeclock.New()
	e := newEnv(t, envOpts{
		clock:    clk,
		settings: map[string]string{"quiet_period": "5s"},
		provider: func(base outbound.Provider) outbound.Provider {
			rp = &recordingProvider{inner: base, calls: map[string]int{}}
			return rp
		},
	})
	e.addAccount("acc", "9101", 100, 10, sim.Limits{Rate: 1000})
	e.stop()
	to := "15559990001"
	b := textMsg(t, admit.Request{MsgID: "m-b", AccountID: "acc", To: to})
	a := textMsg(t, admit.Request{MsgID: "m-a", AccountID: "acc", To: to})
	ctx := context.Background()
	if _, err := e.store.InsertMessages(ctx, []wamux.Message{b, a}); err != nil { // one batch, one created_at
		t.Fatal(err)
	}
	// "m-b" was the recipient's head and in flight at the crash.
	if ok, err := e.store.UpdateMessage(ctx, store.MessageUpdate{MsgID: "m-b", From: []wamux.Status{wamux.StatusQueued},
		Status: wamux.StatusSending, AttemptsDelta: 1}); !ok || err != nil {
		t.Fatalf("mark sending: %v %v", ok, err)
	}
	e.start()
	for _, wait := range []time.Duration{0, 4900 * time.Millisecond} {
		e.elapse(clk, wait)
		settle(t, e, "acc")
		if b, a := rp.count("m-b"), rp.count("m-a"); b != 0 || a != 0 {
			t.Fatalf("%v after the restart, within the 5s quiet period, m-b was sent %d times and m-a %d", wait, b, a)
		}
	}
	e.elapse(clk, 200*time.Millisecond)
	testwait.For(t, "both accepted", 15*time.Second, func() bool {
		return e.status("m-a") == wamux.StatusAccepted && e.status("m-b") == wamux.StatusAccepted
	})
}

// TestP2ResendAfterUnknownIsNotLost: a P2 message's outcome is
// unknown; the compensator finds no status and decides to resend. By then
// the message has been queued longer than p2_max_age, so dispatch "sheds"
// it: the shed's compare-and-set (from queued or waiting_seq) does not
// apply to an unknown message, which would stay unknown for ever. It must
// be resent (a resend is not shed).
func TestP2ResendAfterUnknownIsNotLost(t *testing.T) {
	var rp *recordingProvider
	clk := fakeclock.New()
	e := newEnv(t, envOpts{
		clock:    clk,
		settings: map[string]string{"quiet_period": "1s", "p2_max_age": "1s"},
		provider: func(base outbound.Provider) outbound.Provider {
			rp = &recordingProvider{inner: base, firstUnknown: true, calls: map[string]int{}}
			return rp
		},
	})
	e.addAccount("acc", "9102", 100, 10, sim.Limits{Rate: 1000})
	m := textMsg(t, admit.Request{AccountID: "acc", Priority: "P2", To: "15559990002"})
	e.submit(m)
	waitUnknown(t, e, "acc", m.ID)
	// Past the quiet period and p2_max_age.
	e.elapse(clk, 2*time.Second)
	settle(t, e, "acc")
	// Resent (accepted), or given up with a final status: fine.
	if st := e.status(m.ID); st == wamux.StatusUnknown {
		t.Fatalf("P2 message still %s after the quiet period, provider calls %d, queue depth %v: lost",
			st, rp.count(m.ID), e.d.QueueDepth("acc"))
	}
}

// TestRestoreEnqueuesReleasedOnce: a waiting_seq message that is
// releasable at restart is stored as queued (persistSeq) and then listed
// with the queued messages; it must not be appended again, or the queue
// depth (API, metrics, p2_max_depth shedding) counts it twice.
func TestRestoreEnqueuesReleasedOnce(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.addAccount("acc", "9103", 100, 10, sim.Limits{Rate: 1000})
	e.stop()
	ctx := context.Background()
	off := wamux.AccountDisabled // nothing sends: the queue stays as restored
	if _, err := e.store.UpdateAccount(ctx, "acc", store.AccountPatch{State: &off}); err != nil {
		t.Fatal(err)
	}
	m := textMsg(t, admit.Request{AccountID: "acc", ClientSeq: seqp(1), To: "15559990003"})
	if _, err := e.store.InsertMessages(ctx, []wamux.Message{m}); err != nil { // crash before intake
		t.Fatal(err)
	}
	e.start()
	if st := e.status(m.ID); st != wamux.StatusQueued {
		t.Fatalf("status %s, want queued", st)
	}
	if d := e.d.QueueDepth("acc"); d != [3]int{0, 1, 0} {
		t.Fatalf("queue depth %v for one queued P1 message, want [0 1 0]", d)
	}
}

// TestRestoreKeepsSubmitOrderWithinABatch: one batch brings two messages
// to one recipient, "m-z" then "m-y" (client msg_ids, no client_seq), and
// the process stops before either is sent. They share a created_at; after
// the restart they must still go out in submit order, not msg_id order.
func TestRestoreKeepsSubmitOrderWithinABatch(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.addAccount("acc", "9104", 100, 10, sim.Limits{Rate: 1000})
	e.stop()
	to := "15559990004"
	z := textMsg(t, admit.Request{MsgID: "m-z", AccountID: "acc", To: to})
	y := textMsg(t, admit.Request{MsgID: "m-y", AccountID: "acc", To: to})
	if _, err := e.store.InsertMessages(context.Background(), []wamux.Message{z, y}); err != nil { // what Submit stores
		t.Fatal(err)
	}
	e.start()
	e.waitAccepted(2, 10*time.Second)
	var got []string
	for _, m := range e.sim.Messages("9104", to) {
		got = append(got, m.CallbackData)
	}
	if len(got) != 2 || got[0] != "m-z" || got[1] != "m-y" {
		t.Fatalf("after the restart the customer got %v, want [m-z m-y]", got)
	}
}
