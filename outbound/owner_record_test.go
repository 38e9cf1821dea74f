package outbound_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/store"
)

// ownerWriteFails fails the next SetOwner calls, as a store whose writes
// fail for a while does.
type ownerWriteFails struct {
	store.Store
	left   atomic.Int64 // failures still to inject
	failed atomic.Int64
}

func (s *ownerWriteFails) wrap(st store.Store) store.Store { s.Store = st; return s }

func (s *ownerWriteFails) SetOwner(ctx context.Context, to, acc, reason string) error {
	if s.left.Add(-1) >= 0 {
		s.failed.Add(1)
		return errors.New("owner store: write failed")
	}
	return s.Store.SetOwner(ctx, to, acc, reason)
}

// TestFailedOwnerWriteAfterMoveKeepsRecipientTogether: a recipient's owner
// a cools down with its first message queued; the next message moves the
// recipient, and the first message with it, to b, but the write recording
// b as owner fails, and keeps failing. Once a is back, the recipient's
// third message must
// still follow its messages to b: routed by the stale owner it went out
// from a, so the recipient was split over two numbers and its newer
// messages could pass older ones.
func TestFailedOwnerWriteAfterMoveKeepsRecipientTogether(t *testing.T) {
	to := "15557300001"
	fails := &ownerWriteFails{}
	e, clk, first := spamCooledOwnerOn(t, to, "7301", "7302", fails.wrap)
	fails.left.Store(1 << 40) // every owner write fails until the end
	second := textMsg(t, admit.Request{MsgID: "second", To: to})
	r := e.submit(second)[0]
	if r.Err != nil {
		t.Fatalf("second message refused after its recipient moved: %v", r.Err)
	}
	if r.Message.AccountID != "b" {
		t.Fatalf("second message routed to %s while a cools down, want b", r.Message.AccountID)
	}
	if acc := e.message(first.ID).AccountID; acc != "b" {
		t.Fatalf("the first message is under %s, want b (moved with its recipient)", acc)
	}
	clk.Advance(cloudapi.SpamCooldown + time.Second)
	e.d.Kick()
	testwait.For(t, "a out of its cooldown", 10*time.Second, func() bool { return e.d.LimitState("a").State == wamux.AccountActive })
	third := textMsg(t, admit.Request{MsgID: "third", To: to})
	if acc := e.submit(third)[0].Message.AccountID; acc != "b" {
		t.Fatalf("third message routed to %s, want b, where the recipient's messages went", acc)
	}
	testwait.For(t, "all three accepted", 10*time.Second, func() bool {
		return e.status(first.ID) == wamux.StatusAccepted && e.status(second.ID) == wamux.StatusAccepted && e.status(third.ID) == wamux.StatusAccepted
	})
	if got := simOrder(e, to); !slices.Equal(got, []string{"first", "second", "third"}) {
		t.Fatalf("the customer got %v, want [first second third]", got)
	}
	fails.left.Store(0)
	e.d.Kick()
	testwait.For(t, "the owner stored once writes work again", 20*time.Second, func() bool {
		o, err := e.store.GetOwner(context.Background(), to)
		return err == nil && o == "b"
	})
}

// TestFailedOwnerWriteOffDisabledAccountIsRetried: a is disabled with a
// routed recipient's message queued on it; the evacuation moves the
// message to b, and the owner write fails, for a while. When a is enabled
// again the recipient's next message must go to b, and once writes work
// the owner lands in the store.
func TestFailedOwnerWriteOffDisabledAccountIsRetried(t *testing.T) {
	fails := &ownerWriteFails{}
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk, wrapStore: fails.wrap})
	to := "15557300002"
	m1 := textMsg(t, admit.Request{MsgID: "m1", To: to})
	queuedOnPausedPool(t, e, clk, m1)
	fails.left.Store(1 << 40) // owner writes fail until the end
	setState(t, e, "b", wamux.AccountActive)
	setState(t, e, "a", wamux.AccountDisabled)
	testwait.For(t, "m1 moved to b", 10*time.Second, func() bool { return e.message(m1.ID).AccountID == "b" })
	testwait.For(t, "the owner write failed", 10*time.Second, func() bool { return fails.failed.Load() >= 1 })
	setState(t, e, "a", wamux.AccountActive)
	m2 := textMsg(t, admit.Request{MsgID: "m2", To: to})
	if acc := e.submit(m2)[0].Message.AccountID; acc != "b" {
		t.Fatalf("m2 routed to %s, want b, where m1 went", acc)
	}
	testwait.For(t, "both accepted", 10*time.Second, func() bool {
		return e.status(m1.ID) == wamux.StatusAccepted && e.status(m2.ID) == wamux.StatusAccepted
	})
	if got := simOrder(e, to); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Fatalf("the customer got %v, want [m1 m2]", got)
	}
	fails.left.Store(0)
	e.d.Kick()
	testwait.For(t, "the owner stored once writes work again", 20*time.Second, func() bool {
		o, err := e.store.GetOwner(context.Background(), to)
		return err == nil && o == "b"
	})
}

// TestOwnerOwedWrittenWithoutNewMessage: the owner write after a move
// fails; no further message comes for the recipient. The owner still
// reaches the store (the destination's evacuator writes it again), so a
// restart does not depend on the repair.
func TestOwnerOwedWrittenWithoutNewMessage(t *testing.T) {
	to := "15557300003"
	fails := &ownerWriteFails{}
	e, _, _ := spamCooledOwnerOn(t, to, "7311", "7312", fails.wrap)
	fails.left.Store(2) // the move's write and the first retry
	second := textMsg(t, admit.Request{MsgID: "second", To: to})
	if r := e.submit(second)[0]; r.Err != nil || r.Message.AccountID != "b" {
		t.Fatalf("second message: account %s, err %v; want b", r.Message.AccountID, r.Err)
	}
	e.d.Kick() // wakes the evacuators at once, instead of after their retry interval
	testwait.For(t, "the owner stored", 20*time.Second, func() bool {
		o, err := e.store.GetOwner(context.Background(), to)
		return err == nil && o == "b"
	})
}

// TestStartRepairsOwnerFromQueuedMessages: a process moved a recipient's
// queued message from a to b and died before recording b as its owner.
// The next Start must make b the owner (reason restored): otherwise the
// recipient's next message follows the stale owner a, and the customer
// gets it before the older one waiting on b.
func TestStartRepairsOwnerFromQueuedMessages(t *testing.T) {
	clk := fakeclock.New() // frozen: both accounts stay paused, nothing is sent
	e := newEnv(t, envOpts{clock: clk})
	to := "15557300004"
	m1 := textMsg(t, admit.Request{MsgID: "m1", To: to})
	queuedOnPausedPool(t, e, clk, m1)
	e.stop()
	ctx := context.Background()
	ok, err := e.store.UpdateMessage(ctx, store.MessageUpdate{MsgID: m1.ID, From: []wamux.Status{wamux.StatusQueued},
		Status: wamux.StatusQueued, AccountID: "b"})
	if err != nil || !ok {
		t.Fatalf("move m1 in the store: %v %v", ok, err)
	}
	e.start()
	if o := e.owner(to); o != "b" {
		t.Fatalf("owner after restart %s, want b, where its queued message is", o)
	}
	moves, err := e.store.ListOwnerMoves(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	if last := moves[len(moves)-1]; last.Reason != "restored" {
		t.Fatalf("last owner move %+v, want reason restored", last)
	}
	m2 := textMsg(t, admit.Request{MsgID: "m2", To: to})
	if acc := e.submit(m2)[0].Message.AccountID; acc != "b" {
		t.Fatalf("m2 routed to %s, want b, behind m1", acc)
	}
}
