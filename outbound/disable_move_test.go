package outbound_test

import (
	"context"
	"slices"
	"sync/atomic"
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

// setState does what PATCH /v1/accounts/{id} {"state":…} does for active
// (which ends any cooldown) and disabled.
func setState(t *testing.T, e *env, id string, st wamux.AccountState) {
	t.Helper()
	ctx := context.Background()
	p := store.AccountPatch{State: &st}
	tell := e.d.AccountChanged
	if st == wamux.AccountActive {
		zero := time.Time{}
		p.CooldownUntil = &zero
		tell = e.d.AccountReactivated
	}
	a, err := e.store.UpdateAccount(ctx, id, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := tell(ctx, a); err != nil {
		t.Fatal(err)
	}
}

// sentFrom is what the simulator accepted from one number for a
// recipient, as msg_ids in the order accepted.
func sentFrom(e *env, number, to string) []string {
	var ids []string
	for _, m := range e.sim.Messages(number, to) {
		ids = append(ids, m.CallbackData)
	}
	return ids
}

func (e *env) message(id string) wamux.Message {
	e.t.Helper()
	m, err := e.store.GetMessage(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *env) owner(to string) string {
	e.t.Helper()
	o, err := e.store.GetOwner(context.Background(), to)
	if err != nil {
		e.t.Fatal(err)
	}
	return o
}

// queuedOnPausedPool builds accounts a (number "8101") and b ("8102"),
// both paused by a cooldown, and routes the given messages (without
// account_id) while they are: a recipient's first message goes to a,
// whose cooldown ends first, and the others follow their owner (nobody
// better), so they all wait queued on a.
func queuedOnPausedPool(t *testing.T, e *env, clk *fakeclock.Clock, msgs ...wamux.Message) {
	t.Helper()
	e.addAccount("a", "8101", 100, 10, sim.Limits{Rate: 1000})
	e.addAccount("b", "8102", 100, 10, sim.Limits{Rate: 1000})
	coolDown(t, e, "a", clk.Now().Add(time.Hour))
	coolDown(t, e, "b", clk.Now().Add(2*time.Hour))
	for _, m := range msgs {
		if acc := e.submit(m)[0].Message.AccountID; acc != "a" {
			t.Fatalf("message %s went to %s, want a", m.ID, acc)
		}
	}
	testwait.For(t, "all queued on a", 10*time.Second, func() bool { return e.d.QueueDepth("a")[wamux.P1] == len(msgs) })
}

// TestDisabledAccountHandsRoutedRecipientsOver: a recipient's routed
// messages wait on account a when an operator disables a. They go out
// from b, the pool's other account, in submit order, without the client
// submitting anything new, and the owner change is recorded.
func TestDisabledAccountHandsRoutedRecipientsOver(t *testing.T) {
	clk := fakeclock.New() // frozen: only the disable can let them out
	e := newEnv(t, envOpts{clock: clk})
	to := "15558100001"
	var want []string
	var msgs []wamux.Message
	for _, id := range []string{"m1", "m2", "m3"} {
		msgs = append(msgs, textMsg(t, admit.Request{MsgID: id, To: to}))
		want = append(want, id)
	}
	queuedOnPausedPool(t, e, clk, msgs...)
	setState(t, e, "b", wamux.AccountActive)
	setState(t, e, "a", wamux.AccountDisabled)
	testwait.For(t, "the recipient's messages accepted", 10*time.Second, func() bool {
		return e.status("m1") == wamux.StatusAccepted && e.status("m2") == wamux.StatusAccepted && e.status("m3") == wamux.StatusAccepted
	})
	if got := sentFrom(e, "8102", to); !slices.Equal(got, want) {
		t.Fatalf("b sent %v, want %v", got, want)
	}
	if got := sentFrom(e, "8101", to); len(got) != 0 {
		t.Fatalf("the disabled account sent %v", got)
	}
	for _, id := range want {
		if acc := e.message(id).AccountID; acc != "b" {
			t.Fatalf("message %s stored under %s, want b", id, acc)
		}
	}
	if o := e.owner(to); o != "b" {
		t.Fatalf("the recipient's owner is %s, want b", o)
	}
	moves, err := e.store.ListOwnerMoves(context.Background(), to)
	if err != nil {
		t.Fatal(err)
	}
	if last := moves[len(moves)-1]; last.From != "a" || last.To != "b" || last.Reason != "account_disabled" {
		t.Fatalf("last recorded move %+v, want a to b for account_disabled", last)
	}
	if got := metric(t, e, "wamux_recipient_reroutes_total", map[string]string{"reason": "account_disabled"}); got != 1 {
		t.Fatalf("reroutes for account_disabled = %v, want 1", got)
	}
}

// TestProviderDisableHandsRecipientOver: the provider answers a routed
// recipient's first message with 190 (token expired): the account is
// disabled with that message back in its queue and the next one behind it.
// Both go out from the pool's other account, in order, once each.
func TestProviderDisableHandsRecipientOver(t *testing.T) {
	to := "15558200001"
	sp, wrap := newScripted(map[string]cloudapi.Result{
		to: {Outcome: cloudapi.Disable, Code: 190, HTTPStatus: 401, Reason: "190: access token expired"},
	})
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk, provider: wrap})
	e.addAccount("a", "8201", 100, 10, sim.Limits{Rate: 1000})
	e.addAccount("b", "8202", 100, 10, sim.Limits{Rate: 1000})
	first := textMsg(t, admit.Request{MsgID: "first", To: to})
	second := textMsg(t, admit.Request{MsgID: "second", To: to})
	for _, r := range e.submit(first, second) {
		if r.Message.AccountID != "a" {
			t.Fatalf("%s routed to %s, want a (the recipient's owner)", r.Message.ID, r.Message.AccountID)
		}
	}
	testwait.For(t, "both accepted", 10*time.Second, func() bool {
		return e.status(first.ID) == wamux.StatusAccepted && e.status(second.ID) == wamux.StatusAccepted
	})
	if st := e.d.LimitState("a"); e.message(first.ID).AccountID != "b" || e.message(second.ID).AccountID != "b" {
		t.Fatalf("messages stored under %s and %s, want b (a is %v)", e.message(first.ID).AccountID, e.message(second.ID).AccountID, st.State)
	}
	if got := sentFrom(e, "8202", to); !slices.Equal(got, []string{"first", "second"}) {
		t.Fatalf("b sent %v, want [first second]", got)
	}
	if n := sp.callsTo(to); n != 3 {
		t.Fatalf("%d provider calls for the recipient, want 3 (the refused one and one per message from b)", n)
	}
	if o := e.owner(to); o != "b" {
		t.Fatalf("the recipient's owner is %s, want b", o)
	}
}

// TestDisabledAccountKeepsClientChosenMessages: when a is disabled, a
// recipient whose waiting message names a (account_id given by the
// client) stays with it; a routed recipient beside it moves to b.
func TestDisabledAccountKeepsClientChosenMessages(t *testing.T) {
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk})
	routedTo, chosenTo := "15558300001", "15558300002"
	routedMsg := textMsg(t, admit.Request{MsgID: "routed", To: routedTo})
	queuedOnPausedPool(t, e, clk, routedMsg)
	chosen := textMsg(t, admit.Request{MsgID: "chosen", AccountID: "a", To: chosenTo})
	e.submit(chosen)
	// A routed message of the same recipient, behind the chosen one:
	// the recipient cannot move without leaving the chosen one behind.
	behind := textMsg(t, admit.Request{MsgID: "behind", To: chosenTo})
	testwait.For(t, "the chosen message queued", 10*time.Second, func() bool { return e.d.QueueDepth("a")[wamux.P1] == 2 })
	if acc := e.submit(behind)[0].Message.AccountID; acc != "a" {
		t.Fatalf("behind routed to %s, want a", acc)
	}
	testwait.For(t, "all queued", 10*time.Second, func() bool { return e.d.QueueDepth("a")[wamux.P1] == 3 })
	setState(t, e, "b", wamux.AccountActive)
	setState(t, e, "a", wamux.AccountDisabled)
	testwait.For(t, "the routed recipient's message accepted", 10*time.Second, func() bool {
		return e.status(routedMsg.ID) == wamux.StatusAccepted
	})
	for _, id := range []string{chosen.ID, behind.ID} {
		if m := e.message(id); m.Status != wamux.StatusQueued || m.AccountID != "a" {
			t.Fatalf("message %s is %s under %s, want queued under a", id, m.Status, m.AccountID)
		}
	}
	if d := e.d.QueueDepth("a"); d[wamux.P1] != 2 {
		t.Fatalf("a's queue %v, want the 2 messages of the recipient with a client-chosen one", d)
	}
	if got := sentFrom(e, "", chosenTo); len(got) != 0 {
		t.Fatalf("sent %v to the recipient whose message names the disabled account", got)
	}
}

// TestDisabledAccountMovesRecipientAfterUnknownResolves: a routed
// recipient's first message has an unknown outcome on a when a is
// disabled. Nothing of the recipient moves while it is unknown (a resend
// would have to come from a's number); another recipient moves at once.
// Once a status resolves the unknown one, the recipient's next message
// moves to b and goes out, and the first is never sent again.
func TestDisabledAccountMovesRecipientAfterUnknownResolves(t *testing.T) {
	pinned, free := "15558400001", "15558400002"
	sp, wrap := newScripted(map[string]cloudapi.Result{
		pinned: {Outcome: cloudapi.Unknown, Code: -1, Reason: "timeout"},
		free:   {Outcome: cloudapi.Cooldown, Code: 131048, Delay: cloudapi.SpamCooldown, HTTPStatus: 400, Reason: "131048: spam rate limit"},
	})
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk, provider: wrap, settings: map[string]string{"quiet_period": "10s"}})
	e.addAccount("a", "8401", 100, 10, sim.Limits{Rate: 1000})
	e.addAccount("b", "8402", 100, 10, sim.Limits{Rate: 1000})
	coolDown(t, e, "b", clk.Now().Add(time.Hour))
	first := textMsg(t, admit.Request{MsgID: "first", To: pinned})
	second := textMsg(t, admit.Request{MsgID: "second", To: pinned})
	other := textMsg(t, admit.Request{MsgID: "other", To: free})
	for _, r := range e.submit(first, second, other) {
		if r.Message.AccountID != "a" {
			t.Fatalf("%s routed to %s, want a (b cools down)", r.Message.ID, r.Message.AccountID)
		}
	}
	testwait.For(t, "first unknown, other back in the queue", 10*time.Second, func() bool {
		return e.status(first.ID) == wamux.StatusUnknown && e.status(other.ID) == wamux.StatusQueued &&
			sp.callsTo(free) == 1 && e.d.AttemptsRunning("a") == 0
	})
	setState(t, e, "b", wamux.AccountActive)
	setState(t, e, "a", wamux.AccountDisabled)
	testwait.For(t, "the other recipient's message accepted from b", 10*time.Second, func() bool {
		return e.status(other.ID) == wamux.StatusAccepted
	})
	if m := e.message(second.ID); m.Status != wamux.StatusQueued || m.AccountID != "a" {
		t.Fatalf("while the first is unknown the second is %s under %s, want queued under a", m.Status, m.AccountID)
	}
	// A status names the first message (what the receipt pipeline does).
	if ok, err := e.store.UpdateMessage(context.Background(), store.MessageUpdate{MsgID: first.ID,
		From: []wamux.Status{wamux.StatusUnknown}, Status: wamux.StatusDelivered}); err != nil || !ok {
		t.Fatalf("resolve the first: %v %v", ok, err)
	}
	clk.Advance(11 * time.Second)
	e.d.Kick()
	testwait.For(t, "the second accepted", 10*time.Second, func() bool { return e.status(second.ID) == wamux.StatusAccepted })
	if got := sentFrom(e, "8402", pinned); !slices.Equal(got, []string{"second"}) {
		t.Fatalf("b sent %v to the recipient, want [second]", got)
	}
	if n := sp.callsTo(pinned); n != 2 {
		t.Fatalf("%d provider calls for the recipient, want 2 (the first is never resent)", n)
	}
	if st := e.status(first.ID); st != wamux.StatusDelivered {
		t.Fatalf("first is %s, want delivered", st)
	}
	if o := e.owner(pinned); o != "b" {
		t.Fatalf("the recipient's owner is %s, want b", o)
	}
}

// TestStartHandsDisabledAccountsRecipientsOver: the store holds a routed
// recipient's messages queued on an account stored disabled (disabled
// while the gateway was down, or before this version). Start moves them
// to the pool's other account and they go out, in order.
func TestStartHandsDisabledAccountsRecipientsOver(t *testing.T) {
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk})
	to := "15558500001"
	m1 := textMsg(t, admit.Request{MsgID: "m1", To: to})
	m2 := textMsg(t, admit.Request{MsgID: "m2", To: to})
	queuedOnPausedPool(t, e, clk, m1, m2)
	e.stop()
	ctx := context.Background()
	disabled, active, zero := wamux.AccountDisabled, wamux.AccountActive, time.Time{}
	if _, err := e.store.UpdateAccount(ctx, "a", store.AccountPatch{State: &disabled}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.UpdateAccount(ctx, "b", store.AccountPatch{State: &active, CooldownUntil: &zero}); err != nil {
		t.Fatal(err)
	}
	e.start()
	testwait.For(t, "both accepted", 10*time.Second, func() bool {
		return e.status(m1.ID) == wamux.StatusAccepted && e.status(m2.ID) == wamux.StatusAccepted
	})
	if got := sentFrom(e, "8102", to); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Fatalf("b sent %v, want [m1 m2]", got)
	}
	if o := e.owner(to); o != "b" {
		t.Fatalf("the recipient's owner is %s, want b", o)
	}
}

// TestDisabledAccountWithoutOtherKeepsRecipients: when no other account
// can take them (the only other one is disabled too), the recipient's
// messages stay where they are.
func TestDisabledAccountWithoutOtherKeepsRecipients(t *testing.T) {
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk})
	to := "15558600001"
	m := textMsg(t, admit.Request{MsgID: "m", To: to})
	queuedOnPausedPool(t, e, clk, m)
	setState(t, e, "b", wamux.AccountDisabled)
	setState(t, e, "a", wamux.AccountDisabled)
	// Re-enabling a ends the wait: had the message moved to b, it would
	// wait there for good.
	setState(t, e, "a", wamux.AccountActive)
	testwait.For(t, "the message accepted", 10*time.Second, func() bool { return e.status(m.ID) == wamux.StatusAccepted })
	if got := sentFrom(e, "8101", to); !slices.Equal(got, []string{"m"}) {
		t.Fatalf("a sent %v, want [m]", got)
	}
}

// TestDisabledAccountMovesWhenCooldownEnds: a is disabled while b, the
// only other account, cools down: nothing can take a's recipients then.
// The evacuator looks again when b's cooldown ends (a cooldown ends in
// the limiter alone; nothing else would wake it) and the recipient moves.
func TestDisabledAccountMovesWhenCooldownEnds(t *testing.T) {
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk})
	to := "15558700001"
	m := textMsg(t, admit.Request{MsgID: "m", To: to})
	queuedOnPausedPool(t, e, clk, m)
	setState(t, e, "a", wamux.AccountDisabled)
	if wait := e.d.EvacuateNow("a"); wait != 2*time.Hour {
		t.Fatalf("with b cooling down for 2h the evacuator looks again in %v, want 2h", wait)
	}
	if msg := e.message(m.ID); msg.AccountID != "a" || msg.Status != wamux.StatusQueued {
		t.Fatalf("message %s under %s while no account can take it, want queued under a", msg.Status, msg.AccountID)
	}
	clk.Advance(2*time.Hour + time.Second)
	if wait := e.d.EvacuateNow("a"); wait != 0 {
		t.Fatalf("after the move the evacuator looks again in %v, want never", wait)
	}
	testwait.For(t, "the message accepted", 10*time.Second, func() bool { return e.status(m.ID) == wamux.StatusAccepted })
	if got := sentFrom(e, "8102", to); !slices.Equal(got, []string{"m"}) {
		t.Fatalf("b sent %v, want [m]", got)
	}
}

// TestDisabledAccountKeepsRecipientWithUnresolvedOutcome: a routed
// recipient's first message has an unknown outcome on a when a is
// disabled, and no status resolves it. Its resend must come from a's
// number (the statuses of the first send name it), so the recipient stays
// on a with its next message; both go out from a once it is re-enabled.
func TestDisabledAccountKeepsRecipientWithUnresolvedOutcome(t *testing.T) {
	to := "15558800001"
	sp, wrap := newScripted(map[string]cloudapi.Result{
		to: {Outcome: cloudapi.Unknown, Code: -1, Reason: "timeout"},
	})
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk, provider: wrap, settings: map[string]string{"quiet_period": "10s"}})
	e.addAccount("a", "8801", 100, 10, sim.Limits{Rate: 1000})
	e.addAccount("b", "8802", 100, 10, sim.Limits{Rate: 1000})
	first := textMsg(t, admit.Request{MsgID: "first", To: to})
	second := textMsg(t, admit.Request{MsgID: "second", To: to})
	e.submit(first, second)
	testwait.For(t, "first unknown", 10*time.Second, func() bool {
		return e.status(first.ID) == wamux.StatusUnknown && e.d.AttemptsRunning("a") == 0
	})
	setState(t, e, "a", wamux.AccountDisabled)
	clk.Advance(11 * time.Second)
	e.d.Kick()
	// The compensator found no status: the first is now due for a resend.
	testwait.For(t, "compensation decided", 10*time.Second, func() bool {
		return metric(t, e, "wamux_unknown_outcomes", map[string]string{"account_id": "a"}) == 0 && e.d.AttemptsRunning("a") == 0
	})
	if wait := e.d.EvacuateNow("a"); wait != 0 {
		t.Fatalf("the evacuator looks again in %v, want never (nothing it may move)", wait)
	}
	for _, id := range []string{first.ID, second.ID} {
		if m := e.message(id); m.AccountID != "a" {
			t.Fatalf("message %s moved to %s with its outcome unresolved", id, m.AccountID)
		}
	}
	setState(t, e, "a", wamux.AccountActive)
	testwait.For(t, "both accepted", 10*time.Second, func() bool {
		return e.status(first.ID) == wamux.StatusAccepted && e.status(second.ID) == wamux.StatusAccepted
	})
	if got := sentFrom(e, "8801", to); !slices.Equal(got, []string{"first", "second"}) {
		t.Fatalf("a sent %v, want [first second]", got)
	}
	if got := sentFrom(e, "8802", to); len(got) != 0 {
		t.Fatalf("b sent %v to a recipient pinned by an unresolved outcome", got)
	}
	if n := sp.callsTo(to); n != 3 {
		t.Fatalf("%d provider calls, want 3 (the unknown one, its resend, the second)", n)
	}
}

// TestDisabledOwnerMovesNewMessageWhenCooldownEnds: a recipient's owner a
// is disabled with nothing of it queued, while b, the only other account,
// cools down. The recipient's next message is routed to a (nobody better)
// and waits there only until b's cooldown ends: the message wakes a's
// evacuator, which looks again when b is back, as it does for a message
// queued on a before the disable. Real clock: b's cooldown ends by itself.
func TestDisabledOwnerMovesNewMessageWhenCooldownEnds(t *testing.T) {
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk})
	e.addAccount("a", "8111", 100, 10, sim.Limits{Rate: 1000})
	e.addAccount("b", "8112", 100, 10, sim.Limits{Rate: 1000})
	to := "15558110001"
	first := textMsg(t, admit.Request{MsgID: "first", To: to})
	if acc := e.submit(first)[0].Message.AccountID; acc != "a" {
		t.Fatalf("first message routed to %s, want a (equal ratios, smallest id)", acc)
	}
	testwait.For(t, "the first message accepted", 10*time.Second, func() bool {
		return e.status(first.ID) == wamux.StatusAccepted && e.d.AttemptsRunning("a") == 0
	})
	coolDown(t, e, "b", clk.Now().Add(3*time.Second))
	setState(t, e, "a", wamux.AccountDisabled)
	next := textMsg(t, admit.Request{MsgID: "next", To: to})
	if acc := e.submit(next)[0].Message.AccountID; acc != "a" {
		t.Fatalf("next message routed to %s while b cools down, want its owner a", acc)
	}
	// Nothing but the clock wakes a's evacuator once b's cooldown ends.
	testwait.For(t, "the next message accepted from b", 15*time.Second, func() bool {
		clk.Advance(time.Second)
		return e.status(next.ID) == wamux.StatusAccepted
	})
	if got := sentFrom(e, "8112", to); !slices.Equal(got, []string{"next"}) {
		t.Fatalf("b sent %v, want [next]", got)
	}
}

// TestFailedMoveWriteKeepsRecipientOrder: a is disabled with a routed
// recipient's m1 and m2 queued on it, and the write moving m2 to b fails
// once. The move is all or nothing: had m1 gone to b and the owner become
// b, the recipient's next message m3 would follow it there and go out
// before m2, which moves only when the evacuator tries again.
func TestFailedMoveWriteKeepsRecipientOrder(t *testing.T) {
	fs := &flakyStore{}
	clk := fakeclock.New() // frozen: a's cooldown never ends by itself
	e := newEnv(t, envOpts{clock: clk, wrapStore: fs.wrap})
	to := "15558120001"
	m1 := textMsg(t, admit.Request{MsgID: "m1", To: to})
	m2 := textMsg(t, admit.Request{MsgID: "m2", To: to})
	queuedOnPausedPool(t, e, clk, m1, m2)
	fs.failNext(1, false, func(u store.MessageUpdate) bool { return u.MsgID == "m2" && u.AccountID == "b" })
	setState(t, e, "b", wamux.AccountActive)
	setState(t, e, "a", wamux.AccountDisabled)
	testwait.For(t, "the move of m2 failed", 10*time.Second, func() bool { return fs.failed.Load() == 1 })
	// The evacuator's pass that failed is over once it let go of the
	// routing lock: the next message's routing waits for it.
	m3 := textMsg(t, admit.Request{MsgID: "m3", To: to})
	if r := e.submit(m3)[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	testwait.For(t, "all three accepted", 20*time.Second, func() bool {
		return e.status(m1.ID) == wamux.StatusAccepted && e.status(m2.ID) == wamux.StatusAccepted && e.status(m3.ID) == wamux.StatusAccepted
	})
	if got := simOrder(e, to); !slices.Equal(got, []string{"m1", "m2", "m3"}) {
		t.Fatalf("sent in the order %v, want [m1 m2 m3]", got)
	}
}

// gatedInsert holds the next InsertMessages, once armed, until released:
// a Submit caught between routing and handing its messages over.
type gatedInsert struct {
	store.Store
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *gatedInsert) wrap(st store.Store) store.Store { g.Store = st; return g }

func (g *gatedInsert) InsertMessages(ctx context.Context, msgs []wamux.Message) ([]store.InsertResult, error) {
	if g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.release
	}
	return g.Store.InsertMessages(ctx, msgs)
}

// TestEvacuationWaitsForMessageInTransit: a routed message is on its way
// to its disabled owner (routed, not yet in the worker's inbox) when
// another account becomes usable. The evacuation must not move the
// recipient's queued messages and owner without it: the message would land
// behind them on the disabled account, and the recipient's next message
// could reach the new owner first. Once it has arrived, all of them move,
// in order.
func TestEvacuationWaitsForMessageInTransit(t *testing.T) {
	clk := fakeclock.New()
	g := &gatedInsert{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, envOpts{clock: clk, wrapStore: g.wrap})
	to := "15558900001"
	m1 := textMsg(t, admit.Request{MsgID: "m1", To: to})
	m2 := textMsg(t, admit.Request{MsgID: "m2", To: to})
	m3 := textMsg(t, admit.Request{MsgID: "m3", To: to})
	queuedOnPausedPool(t, e, clk, m1)
	setState(t, e, "a", wamux.AccountDisabled) // b still cools down: nowhere to go
	g.armed.Store(true)
	submitted := make(chan []outbound.SubmitResult, 1)
	go func() {
		res, _ := e.d.Submit(context.Background(), []wamux.Message{m2})
		submitted <- res
	}()
	<-g.entered // m2 is routed to a (nobody better) and held before its insert
	setState(t, e, "b", wamux.AccountActive)
	e.d.EvacuateNow("a")
	if o := e.owner(to); o != "a" {
		t.Fatalf("the recipient moved to %s while its message was on its way to a", o)
	}
	if acc := e.message(m1.ID).AccountID; acc != "a" {
		t.Fatalf("m1 moved to %s while m2 was on its way to a", acc)
	}
	close(g.release)
	if res := <-submitted; len(res) != 1 || res[0].Err != nil || res[0].Message.AccountID != "a" {
		t.Fatalf("m2's submit: %+v, want routed to a", res)
	}
	e.submit(m3)
	testwait.For(t, "all accepted", 10*time.Second, func() bool {
		return e.status(m1.ID) == wamux.StatusAccepted && e.status(m2.ID) == wamux.StatusAccepted &&
			e.status(m3.ID) == wamux.StatusAccepted
	})
	if got := sentFrom(e, "8102", to); !slices.Equal(got, []string{"m1", "m2", "m3"}) {
		t.Fatalf("b sent %v, want [m1 m2 m3]", got)
	}
}
