package outbound_test

import (
	"context"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
)

// TestDuplicateSubmitChangesNoRouting: a client retries a message it
// already submitted without account_id, after the account it was routed
// to went out of service. The retry returns the original message and
// changes nothing: the recipient's owner stays, no move is recorded, no
// reroute counted: the message was never new.
func TestDuplicateSubmitChangesNoRouting(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.addAccount("a", "9401", 100, 10, sim.Limits{Rate: 1000})
	e.addAccount("b", "9402", 100, 10, sim.Limits{Rate: 1000})
	to := "15559400001"
	first := e.submit(textMsg(t, admit.Request{MsgID: "client-1", To: to}))[0].Message
	// Sent before its account goes out of service: a message still queued
	// there would move to the other account with its recipient, a move
	// the evacuator makes, not the retry.
	testwait.For(t, "the first message accepted", 10*time.Second, func() bool {
		return e.status(first.ID) == wamux.StatusAccepted && e.d.AttemptsRunning(first.AccountID) == 0
	})
	ctx := context.Background()
	acc, err := e.store.GetAccount(ctx, first.AccountID)
	if err != nil {
		t.Fatal(err)
	}
	acc.State = wamux.AccountDisabled
	if err := e.d.AccountChanged(ctx, acc); err != nil {
		t.Fatal(err)
	}
	reroutes := metric(t, e, "wamux_recipient_reroutes_total", nil)

	retry := e.submit(textMsg(t, admit.Request{MsgID: "client-1", To: to}))[0]
	if !retry.Duplicate || retry.Message.AccountID != first.AccountID {
		t.Fatalf("retry: duplicate %v, account %q; want the original on %q", retry.Duplicate, retry.Message.AccountID, first.AccountID)
	}
	if owner, err := e.store.GetOwner(ctx, to); err != nil || owner != first.AccountID {
		t.Fatalf("owner after the retry %q (%v), want %q", owner, err, first.AccountID)
	}
	if moves, err := e.store.ListOwnerMoves(ctx, to); err != nil || len(moves) != 1 {
		t.Fatalf("owner moves after the retry %+v (%v), want only the first assignment", moves, err)
	}
	if got := metric(t, e, "wamux_recipient_reroutes_total", nil); got != reroutes {
		t.Fatalf("reroutes %v after the retry, want %v", got, reroutes)
	}
}
