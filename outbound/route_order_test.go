package outbound_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
)

// simOrder is the order in which the simulator accepted the recipient's
// messages, across every number, as msg_ids.
func simOrder(e *env, to string) []string {
	var ids []string
	for _, m := range e.sim.Messages("", to) {
		ids = append(ids, m.CallbackData)
	}
	return ids
}

// coolDown does what PATCH /v1/accounts/{id} {"state":"cooldown",
// "cooldown_until":…} does: the account stays active with a cooldown end,
// which pauses it until then.
func coolDown(t *testing.T, e *env, id string, until time.Time) {
	t.Helper()
	ctx := context.Background()
	active := wamux.AccountActive
	a, err := e.store.UpdateAccount(ctx, id, store.AccountPatch{State: &active, CooldownUntil: &until})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.d.AccountChanged(ctx, a); err != nil {
		t.Fatal(err)
	}
}

// spamCooledOwner routes a recipient's first message to account a (of a
// and b, equal in everything but their ids), whose send gets 131048 (spam
// rate limit): a cools down with the message queued on it.
func spamCooledOwner(t *testing.T, to, numberA, numberB string) (*env, *fakeclock.Clock, wamux.Message) {
	t.Helper()
	return spamCooledOwnerOn(t, to, numberA, numberB, nil)
}

// spamCooledOwnerOn is spamCooledOwner with the dispatcher's store wrapped
// by wrapStore (nil: none).
func spamCooledOwnerOn(t *testing.T, to, numberA, numberB string, wrapStore func(store.Store) store.Store) (*env, *fakeclock.Clock, wamux.Message) {
	t.Helper()
	clk := fakeclock.New()
	sp, wrap := newScripted(map[string]cloudapi.Result{
		to: {Outcome: cloudapi.Cooldown, Code: 131048, Delay: cloudapi.SpamCooldown, HTTPStatus: 400, Reason: "131048: spam rate limit"},
	})
	e := newEnv(t, envOpts{clock: clk, provider: wrap, wrapStore: wrapStore})
	e.addAccount("a", numberA, 100, 10, sim.Limits{Rate: 1000})
	e.addAccount("b", numberB, 100, 10, sim.Limits{Rate: 1000})
	first := textMsg(t, admit.Request{MsgID: "first", To: to})
	if owner := e.submit(first)[0].Message.AccountID; owner != "a" {
		t.Fatalf("first message routed to %s, want a (equal ratios, smallest id)", owner)
	}
	testwait.For(t, "a cooling down with the first message queued", 10*time.Second, func() bool {
		return sp.callsTo(to) == 1 && e.status(first.ID) == wamux.StatusQueued &&
			e.d.LimitState("a").State == wamux.AccountCooldown && e.d.AttemptsRunning("a") == 0
	})
	return e, clk, first
}

// TestRecipientMovesWithItsQueuedMessages: a routed recipient's owner
// goes into a cooldown (131048) while the recipient's first message waits
// on it. The next message moves the recipient to another account; the
// waiting message moves with it, ahead of the new one, so the customer
// gets them in submit order, not the newer first.
func TestRecipientMovesWithItsQueuedMessages(t *testing.T) {
	to := "15557100001"
	e, clk, first := spamCooledOwner(t, to, "7101", "7102")
	second := textMsg(t, admit.Request{MsgID: "second", To: to})
	if acc := e.submit(second)[0].Message.AccountID; acc != "b" {
		t.Fatalf("second message routed to %s while a cools down, want b", acc)
	}
	testwait.For(t, "the second message accepted", 10*time.Second, func() bool { return e.status(second.ID) == wamux.StatusAccepted })
	// Let the cooldown end, so that a message left behind on a goes out too.
	clk.Advance(cloudapi.SpamCooldown + time.Second)
	e.d.Kick()
	testwait.For(t, "the first message accepted", 10*time.Second, func() bool { return e.status(first.ID) == wamux.StatusAccepted })
	if got := simOrder(e, to); !slices.Equal(got, []string{"first", "second"}) {
		t.Fatalf("the customer got %v, want [first second]", got)
	}
	m, err := e.store.GetMessage(context.Background(), first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if m.AccountID != "b" {
		t.Fatalf("the first message is stored under %s, want b (it moved with its recipient)", m.AccountID)
	}
}

// TestUnknownOutcomeKeepsRecipientOnItsAccount: the recipient's first
// message has an unknown outcome on its owner when the owner goes into a
// cooldown. Its resend must go from the same account (the statuses of the
// first send name that number), and nothing of the recipient may pass it:
// the recipient stays, the next message waits behind it.
func TestUnknownOutcomeKeepsRecipientOnItsAccount(t *testing.T) {
	clk := fakeclock.New()
	to := "15557100002"
	sp, wrap := newScripted(map[string]cloudapi.Result{
		to: {Outcome: cloudapi.Unknown, Code: -1, Reason: "timeout"},
	})
	e := newEnv(t, envOpts{clock: clk, provider: wrap, settings: map[string]string{"quiet_period": "10s"}})
	e.addAccount("a", "7201", 100, 10, sim.Limits{Rate: 1000})
	e.addAccount("b", "7202", 100, 10, sim.Limits{Rate: 1000})
	first := textMsg(t, admit.Request{MsgID: "first", To: to})
	if owner := e.submit(first)[0].Message.AccountID; owner != "a" {
		t.Fatalf("first message routed to %s, want a", owner)
	}
	testwait.For(t, "the first outcome unknown", 10*time.Second, func() bool {
		return sp.callsTo(to) == 1 && e.status(first.ID) == wamux.StatusUnknown
	})
	coolDown(t, e, "a", clk.Now().Add(time.Minute))
	second := textMsg(t, admit.Request{MsgID: "second", To: to})
	if acc := e.submit(second)[0].Message.AccountID; acc != "a" {
		t.Fatalf("second message routed to %s, want a: the recipient's unknown first message pins it", acc)
	}
	clk.Advance(2 * time.Minute)
	e.d.Kick()
	testwait.For(t, "both accepted", 10*time.Second, func() bool {
		return e.status(first.ID) == wamux.StatusAccepted && e.status(second.ID) == wamux.StatusAccepted
	})
	if got := simOrder(e, to); !slices.Equal(got, []string{"first", "second"}) {
		t.Fatalf("the customer got %v, want [first second]", got)
	}
}

// TestClientChosenAccountKeepsRecipient: among the messages waiting for a
// routed recipient on its cooling owner is one whose account_id the client
// gave. It must go out from that account, so the recipient cannot take its
// messages along: it stays, and the next routed message queues behind.
func TestClientChosenAccountKeepsRecipient(t *testing.T) {
	to := "15557100003"
	e, clk, first := spamCooledOwner(t, to, "7301", "7302")
	chosen := textMsg(t, admit.Request{MsgID: "chosen", AccountID: "a", To: to})
	e.submit(chosen)
	third := textMsg(t, admit.Request{MsgID: "third", To: to})
	if acc := e.submit(third)[0].Message.AccountID; acc != "a" {
		t.Fatalf("third message routed to %s, want a: the client chose a for a message waiting there", acc)
	}
	clk.Advance(cloudapi.SpamCooldown + time.Second)
	e.d.Kick()
	testwait.For(t, "all accepted", 10*time.Second, func() bool {
		return e.status(first.ID) == wamux.StatusAccepted && e.status(chosen.ID) == wamux.StatusAccepted &&
			e.status(third.ID) == wamux.StatusAccepted
	})
	if got := simOrder(e, to); !slices.Equal(got, []string{"first", "chosen", "third"}) {
		t.Fatalf("the customer got %v, want [first chosen third]", got)
	}
	if got := e.sim.Messages("7301", to); len(got) != 3 {
		t.Fatalf("account a sent %d of the recipient's messages, want all 3", len(got))
	}
}

// TestPriorityKeepsRecipientOrder: priority orders recipients, not one
// recipient's messages: a P0 message waits for its own recipient's
// earlier P1 message.
func TestPriorityKeepsRecipientOrder(t *testing.T) {
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk})
	e.addAccount("acc", "7401", 100, 10, sim.Limits{Rate: 1000})
	// Everything below waits in the queue together.
	coolDown(t, e, "acc", clk.Now().Add(time.Minute))
	to := "15557100004"
	e.submit(
		textMsg(t, admit.Request{MsgID: "older-p1", AccountID: "acc", To: to}),
		textMsg(t, admit.Request{MsgID: "urgent-p0", AccountID: "acc", To: to, Priority: "P0"}),
	)
	testwait.For(t, "all queued", 10*time.Second, func() bool { return e.d.QueueDepth("acc") == [3]int{1, 1, 0} })
	clk.Advance(2 * time.Minute)
	e.d.Kick()
	e.waitAccepted(2, 10*time.Second)
	if got := simOrder(e, to); !slices.Equal(got, []string{"older-p1", "urgent-p0"}) {
		t.Fatalf("the customer got %v, want [older-p1 urgent-p0]", got)
	}
}
