package outbound_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
)

// TestRoutingAvoidsBackloggedAccount: under load every account's bucket
// is empty, so "most tokens" does not tell the accounts apart; what does
// is how long a new message would wait behind the queue already there. A
// new recipient sticks to the account it is routed to, so sending it to
// the one with 4 s of backlog rather than the one with 0.1 s makes its
// messages wait 40 times longer while the pool has capacity to spare.
func TestRoutingAvoidsBackloggedAccount(t *testing.T) {
	clk := fakeclock.New() // frozen: the buckets stay empty, the queues stay put
	e := newEnv(t, envOpts{clock: clk})
	e.addAccount("a", "6401", 10, 10, sim.Limits{Rate: 1000})
	e.addAccount("b", "6402", 10, 10, sim.Limits{Rate: 1000})
	var msgs []wamux.Message
	for i := range 50 {
		msgs = append(msgs, textMsg(t, admit.Request{AccountID: "a", To: fmt.Sprintf("1555640%04d", i)}))
	}
	for i := range 11 {
		msgs = append(msgs, textMsg(t, admit.Request{AccountID: "b", To: fmt.Sprintf("1555641%04d", i)}))
	}
	e.submit(msgs...)
	testwait.For(t, "both buckets drained, 40 and 1 left queued", 10*time.Second, func() bool {
		ta, _ := e.d.Tokens("a")
		tb, _ := e.d.Tokens("b")
		return e.sim.Stats().Totals.Accepted == 20 && ta == 0 && tb == 0 &&
			e.d.QueueDepth("a")[wamux.P1] == 40 && e.d.QueueDepth("b")[wamux.P1] == 1
	})
	res := e.submit(textMsg(t, admit.Request{To: "15556429999"}))
	if got := res[0].Message.AccountID; got != "b" {
		t.Fatalf("new recipient routed to %q (40 queued at 10/s) over \"b\" (1 queued at 10/s)", got)
	}
}
