package outbound_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
)

// TestThrottledAccountBacksOffAndLosesNothing: the gateway believes the
// account may send 200/s but Meta allows 40/s; the 130429s lower the
// effective rate, every message is still accepted exactly once.
func TestThrottledAccountBacksOffAndLosesNothing(t *testing.T) {
	e := newEnv(t, envOpts{settings: map[string]string{"cooldown_min": "100ms", "cooldown_max": "400ms"}})
	e.addAccount("acc", "4001", 200, 20, sim.Limits{Rate: 40, Burst: 5})
	const n = 150
	var msgs []wamux.Message
	for i := 0; i < n; i++ {
		msgs = append(msgs, textMsg(t, admit.Request{AccountID: "acc", To: fmt.Sprintf("1555200%04d", i)}))
	}
	e.submit(msgs...)
	e.waitAccepted(n, 60*time.Second)
	st := e.sim.Stats().Totals
	if st.OverLimit == 0 {
		t.Fatal("the simulator never throttled; the test proves nothing")
	}
	if st.Duplicates != 0 || st.Accepted != n {
		t.Fatalf("accepted %d, duplicates %d", st.Accepted, st.Duplicates)
	}
	if got := metric(t, e, "wamux_provider_throttled_total", map[string]string{"account": "acc", "code": "130429"}); got != float64(st.OverLimit) {
		t.Fatalf("throttles counted %v, simulator refused %d", got, st.OverLimit)
	}
	// The simulator counts a message when it answers; the gateway records
	// the answer just after.
	testwait.For(t, "every message recorded accepted", 10*time.Second, func() bool {
		for _, m := range msgs {
			if e.status(m.ID) != wamux.StatusAccepted {
				return false
			}
		}
		return true
	})
}

// TestStaysUnderTheLimit: with the gateway's bucket below Meta's, the
// simulator never refuses for throughput. Meta's burst here leaves room for
// scheduling jitter on a loaded test machine (sends spaced by the bucket can
// arrive bunched); the exact bound is proven by the ratelimit suite.
func TestStaysUnderTheLimit(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.addAccount("acc", "4002", 50, 5, sim.Limits{Rate: 55, Burst: 25})
	const n = 120
	var msgs []wamux.Message
	for i := 0; i < n; i++ {
		msgs = append(msgs, textMsg(t, admit.Request{AccountID: "acc", To: fmt.Sprintf("1555300%04d", i)}))
	}
	e.submit(msgs...)
	e.waitAccepted(n, 30*time.Second)
	if st := e.sim.Stats().Totals; st.OverLimit != 0 || st.PeakAcceptedPerSec > 55+25 {
		t.Fatalf("over limit %d, peak %d/s", st.OverLimit, st.PeakAcceptedPerSec)
	}
}

// TestPriorityOrder: with the bucket nearly empty, P0 messages submitted
// after a backlog of P2 go out before that backlog.
func TestPriorityOrder(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.addAccount("acc", "4003", 20, 1, sim.Limits{Rate: 1000})
	var p2 []wamux.Message
	for i := 0; i < 20; i++ {
		p2 = append(p2, textMsg(t, admit.Request{AccountID: "acc", Priority: "P2", To: fmt.Sprintf("1555400%04d", i)}))
	}
	e.submit(p2...)
	p0 := map[string]bool{}
	var urgent []wamux.Message
	for i := 0; i < 5; i++ {
		m := textMsg(t, admit.Request{AccountID: "acc", Priority: "P0", To: fmt.Sprintf("1555500%04d", i)})
		p0[m.ID] = true
		urgent = append(urgent, m)
	}
	e.submit(urgent...)
	e.waitAccepted(25, 30*time.Second)
	order := e.sim.Messages("4003", "")
	lastP0 := -1
	for i, m := range order {
		if p0[m.CallbackData] {
			lastP0 = i
		}
	}
	// At 20/s at most a few P2 can have gone out before the P0s arrived.
	if lastP0 > 9 {
		t.Fatalf("the last P0 went out at position %d of %d", lastP0, len(order))
	}
}

// TestP2ShedPastMaxDepth: P2 messages beyond p2_max_depth are dropped,
// higher priorities never are.
func TestP2ShedPastMaxDepth(t *testing.T) {
	e := newEnv(t, envOpts{settings: map[string]string{"p2_max_depth": "3"}})
	e.addAccount("acc", "4004", 1, 1, sim.Limits{Rate: 1000})
	var msgs []wamux.Message
	for i := 0; i < 10; i++ {
		msgs = append(msgs, textMsg(t, admit.Request{AccountID: "acc", Priority: "P2", To: fmt.Sprintf("1555600%04d", i)}))
	}
	e.submit(msgs...)
	countDropped := func() int {
		n := 0
		for _, m := range msgs {
			if e.status(m.ID) == wamux.StatusDropped {
				n++
			}
		}
		return n
	}
	testwait.For(t, "P2 shed", 10*time.Second, func() bool { return countDropped() >= 6 })
	// Depth 3 keeps 3 queued plus, at most, one already sent.
	if dropped := countDropped(); dropped > 7 {
		t.Fatalf("%d P2 messages dropped, want 6 or 7", dropped)
	}
	if shed := metric(t, e, "wamux_messages_shed_total", map[string]string{"reason": "depth"}); shed < 6 || shed > 7 {
		t.Fatalf("shed metric %v", shed)
	}
}

// TestRoutingIsStickyAndMovesOffDisabledAccounts: a recipient's first
// message picks an account, later ones follow it; when the owner is
// disabled the recipient moves and the move is recorded.
func TestRoutingIsStickyAndMovesOffDisabledAccounts(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.addAccount("a", "5001", 100, 10, sim.Limits{Rate: 1000})
	e.addAccount("b", "5002", 100, 10, sim.Limits{Rate: 1000})
	to := "15557770000"
	first := e.submit(textMsg(t, admit.Request{To: to}))[0].Message.AccountID
	for i := 0; i < 5; i++ {
		if got := e.submit(textMsg(t, admit.Request{To: to}))[0].Message.AccountID; got != first {
			t.Fatalf("message %d went to %s, owner is %s", i, got, first)
		}
	}
	// A recipient with a message in flight on its owner does not move
	// (TestUnknownOutcomeKeepsRecipientOnItsAccount); here all are out.
	testwait.For(t, "the owner done with the recipient", 10*time.Second, func() bool {
		return e.d.QueueDepth(first) == [3]int{} && e.d.AttemptsRunning(first) == 0
	})
	ctx := context.Background()
	acc, err := e.store.GetAccount(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	acc.State = wamux.AccountDisabled
	if err := e.d.AccountChanged(ctx, acc); err != nil {
		t.Fatal(err)
	}
	moved := e.submit(textMsg(t, admit.Request{To: to}))[0].Message.AccountID
	if moved == first || moved == "" {
		t.Fatalf("after disabling %s the recipient still goes to %q", first, moved)
	}
	moves, err := e.store.ListOwnerMoves(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(moves) != 2 || moves[1].From != first || moves[1].To != moved {
		t.Fatalf("recorded moves %+v", moves)
	}
	// New recipients avoid the disabled account.
	used := map[string]int{}
	for i := 0; i < 20; i++ {
		used[e.submit(textMsg(t, admit.Request{To: fmt.Sprintf("1555888%04d", i)}))[0].Message.AccountID]++
	}
	if used[first] != 0 {
		t.Fatalf("new recipients routed to the disabled account: %v", used)
	}
}

// TestPairLimitHoldsOnlyThatRecipient: Meta answers 131056 for one
// recipient; that recipient backs off (1 s, then 4 s, …) while the
// account's other recipients go on.
func TestPairLimitHoldsOnlyThatRecipient(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.addAccount("acc", "4005", 100, 10, sim.Limits{Rate: 1000, PairInterval: time.Hour, PairBurst: 2})
	busy := "15556660000"
	var toBusy []wamux.Message
	for i := 1; i <= 3; i++ {
		toBusy = append(toBusy, textMsg(t, admit.Request{AccountID: "acc", ClientSeq: seqp(int64(i)), To: busy}))
	}
	e.submit(toBusy...)
	testwait.For(t, "a 131056", 10*time.Second, func() bool {
		return metric(t, e, "wamux_provider_throttled_total", map[string]string{"code": "131056"}) >= 1
	})
	var others []wamux.Message
	for i := 0; i < 20; i++ {
		others = append(others, textMsg(t, admit.Request{AccountID: "acc", To: fmt.Sprintf("1555666%04d", i+1)}))
	}
	e.submit(others...)
	testwait.For(t, "the other recipients' messages accepted", 10*time.Second, func() bool {
		for _, m := range others {
			if e.status(m.ID) != wamux.StatusAccepted {
				return false
			}
		}
		return true
	})
	if s := e.status(toBusy[2].ID); s != wamux.StatusQueued {
		t.Fatalf("the pair-limited message is %s, want queued for a retry", s)
	}
	// Back-off grows: in the time the others took, it was tried at most
	// a few times (at 0 s, 1 s, 5 s), never in a tight loop.
	if hits := e.sim.Stats().Totals.PairOverLimit; hits < 1 || hits > 3 {
		t.Fatalf("pair limit hits %d, want 1 to 3", hits)
	}
}
