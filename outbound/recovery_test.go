package outbound_test

import (
	"context"
	"fmt"
	"sync"
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

// TestRestartMidStreamLosesAndDuplicatesNothing stops the dispatcher while
// messages are flowing and starts a new one on the same store.
func TestRestartMidStreamLosesAndDuplicatesNothing(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.addAccount("acc", "2001", 100, 5, sim.Limits{Rate: 1000})
	const n = 300
	seqOf := map[string]int64{}
	var recipients []string
	for i := 0; i < 10; i++ {
		recipients = append(recipients, fmt.Sprintf("1555100%04d", i))
	}
	var msgs []wamux.Message
	for i := 1; i <= n; i++ {
		m := textMsg(t, admit.Request{AccountID: "acc", ClientSeq: seqp(int64(i)), To: recipients[i%10]})
		seqOf[m.ID] = int64(i)
		msgs = append(msgs, m)
	}
	e.submit(msgs...)
	testwait.For(t, "some messages sent", 20*time.Second, func() bool { return e.sim.Stats().Totals.Accepted >= 50 })
	e.stop()
	sentBefore := e.sim.Stats().Totals.Accepted
	if sentBefore >= n {
		t.Fatalf("everything was sent before the stop (%d); the test proves nothing", sentBefore)
	}
	e.start()
	e.waitAccepted(n, 30*time.Second)
	if got := checkOrder(t, e, "2001", seqOf, recipients); got != n {
		t.Fatalf("accepted %d, want %d", got, n)
	}
	if d := e.sim.Stats().Totals.Duplicates; d != 0 {
		t.Fatalf("%d messages sent twice across the restart", d)
	}
}

// switchingProvider gives the first attempt of each message a client whose
// timeout is shorter than the simulator's slow answer (so the outcome is
// unknown although the simulator accepted), later attempts a patient one.
type switchingProvider struct {
	short, long *cloudapi.Client
	mu          sync.Mutex
	seen        map[string]bool
	calls       atomic.Int64
}

func (p *switchingProvider) Send(ctx context.Context, dest cloudapi.Destination, msg wamux.Message) cloudapi.Result {
	p.calls.Add(1)
	p.mu.Lock()
	first := !p.seen[msg.ID]
	p.seen[msg.ID] = true
	p.mu.Unlock()
	if first {
		return p.short.Send(ctx, dest, msg)
	}
	return p.long.Send(ctx, dest, msg)
}

func newSwitching(t *testing.T) *switchingProvider {
	short, err := cloudapi.New(cloudapi.Config{Timeout: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	long, err := cloudapi.New(cloudapi.Config{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(short.Close)
	t.Cleanup(long.Close)
	return &switchingProvider{short: short, long: long, seen: map[string]bool{}}
}

// TestUnknownOutcomeResentAfterQuietPeriod: the provider accepted but the
// answer never came; with no status arriving, the compensator resends the
// same msg_id once after the quiet period and counts it.
func TestUnknownOutcomeResentAfterQuietPeriod(t *testing.T) {
	sp := newSwitching(t)
	clk := fakeclock.New()
	e := newEnv(t, envOpts{
		clock:    clk,
		simCfg:   sim.Config{Faults: sim.Faults{SlowAccept: 1, SlowDelay: 600 * time.Millisecond}},
		settings: map[string]string{"quiet_period": "300ms"},
		provider: func(outbound.Provider) outbound.Provider { return sp },
	})
	e.addAccount("acc", "3001", 100, 10, sim.Limits{Rate: 1000})
	m := textMsg(t, admit.Request{AccountID: "acc", To: "15552223333"})
	e.submit(m)
	waitUnknown(t, e, "acc", m.ID)
	e.elapse(clk, 300*time.Millisecond)
	testwait.For(t, "message accepted after resend", 20*time.Second, func() bool { return e.status(m.ID) == wamux.StatusAccepted })
	if got := metric(t, e, "wamux_resends_total", map[string]string{"outcome": "resent"}); got != 1 {
		t.Fatalf("resends = %v, want 1", got)
	}
	if d := e.sim.Stats().Totals.Duplicates; d != 1 {
		t.Fatalf("duplicates at the provider = %d, want exactly the one counted resend", d)
	}
}

// TestUnknownOutcomeResolvedByStatus: a status carrying the msg_id arrives
// within the quiet period (the receipt pipeline records it); the
// compensator adopts it and sends nothing again.
func TestUnknownOutcomeResolvedByStatus(t *testing.T) {
	sp := newSwitching(t)
	clk := fakeclock.New()
	e := newEnv(t, envOpts{
		clock:    clk,
		simCfg:   sim.Config{Faults: sim.Faults{SlowAccept: 1, SlowDelay: 600 * time.Millisecond}},
		settings: map[string]string{"quiet_period": "1s"},
		provider: func(outbound.Provider) outbound.Provider { return sp },
	})
	e.addAccount("acc", "3002", 100, 10, sim.Limits{Rate: 1000})
	m := textMsg(t, admit.Request{AccountID: "acc", To: "15552224444"})
	e.submit(m)
	waitUnknown(t, e, "acc", m.ID)
	e.waitAccepted(1, 10*time.Second)
	wamid := e.sim.Messages("3002", "")[0].WAMID
	// What the receipt pipeline does with a status whose callback data
	// names an unknown message.
	ok, err := e.store.UpdateMessage(context.Background(), store.MessageUpdate{MsgID: m.ID,
		From: []wamux.Status{wamux.StatusUnknown}, Status: wamux.StatusSent, WAMID: wamid})
	if err != nil || !ok {
		t.Fatalf("resolve: %v %v", ok, err)
	}
	e.elapse(clk, time.Second)
	testwait.For(t, "compensation resolved", 10*time.Second, func() bool {
		return metric(t, e, "wamux_resends_total", map[string]string{"outcome": "resolved"}) == 1
	})
	if got := sp.calls.Load(); got != 1 {
		t.Fatalf("provider called %d times, want 1", got)
	}
	if e.sim.Stats().Totals.Duplicates != 0 {
		t.Fatal("resent although a status resolved it")
	}
}

// TestCrashLeavesSendingAsUnknown: a message found in status sending at
// start (the process died during the provider call) is never resent
// blindly: it becomes unknown and goes to compensation.
func TestCrashLeavesSendingAsUnknown(t *testing.T) {
	e := newEnv(t, envOpts{settings: map[string]string{"quiet_period": "200ms"}})
	e.addAccount("acc", "3003", 100, 10, sim.Limits{Rate: 1000})
	e.stop()
	m := textMsg(t, admit.Request{AccountID: "acc", To: "15552225555"})
	m.AccountID = "acc"
	ctx := context.Background()
	if _, err := e.store.InsertMessages(ctx, []wamux.Message{m}); err != nil {
		t.Fatal(err)
	}
	if ok, err := e.store.UpdateMessage(ctx, store.MessageUpdate{MsgID: m.ID, Status: wamux.StatusSending, AttemptsDelta: 1}); !ok || err != nil {
		t.Fatalf("mark sending: %v %v", ok, err)
	}
	e.start()
	if st := e.status(m.ID); st != wamux.StatusUnknown {
		t.Fatalf("after restart status %s, want unknown", st)
	}
	// Nothing resolves it, so after the quiet period it is resent once.
	e.waitAccepted(1, 10*time.Second)
	if got := metric(t, e, "wamux_resends_total", map[string]string{"outcome": "resent"}); got != 1 {
		t.Fatalf("resends = %v", got)
	}
}

// earlyStatusProvider stores a delivered state for the wamid before the
// send's response returns, as an agent's receipt overtaking the response
// would.
type earlyStatusProvider struct {
	inner outbound.Provider
	st    store.Store
	acct  string
}

func (p *earlyStatusProvider) Send(ctx context.Context, dest cloudapi.Destination, msg wamux.Message) cloudapi.Result {
	res := p.inner.Send(ctx, dest, msg)
	if res.Outcome == cloudapi.Accepted {
		err := p.st.PutStates(ctx, []store.MessageState{{StateKey: store.StateKey{AccountID: p.acct, MessageID: res.WAMID},
			Type: wamux.ReceiptDelivered, EventTime: time.Now(), UpdatedAt: time.Now()}})
		if err != nil {
			panic(err)
		}
	}
	return res
}

// TestStatusBeforeResponseIsApplied: a status for a wamid the gateway did
// not know yet is applied once the send's response names that wamid.
func TestStatusBeforeResponseIsApplied(t *testing.T) {
	var ep *earlyStatusProvider
	e := newEnv(t, envOpts{provider: func(base outbound.Provider) outbound.Provider {
		ep = &earlyStatusProvider{inner: base, acct: "acc"}
		return ep
	}})
	ep.st = e.store
	e.addAccount("acc", "3004", 100, 10, sim.Limits{Rate: 1000})
	m := textMsg(t, admit.Request{AccountID: "acc", To: "15552226666"})
	e.submit(m)
	testwait.For(t, "early delivered status applied", 10*time.Second, func() bool { return e.status(m.ID) == wamux.StatusDelivered })
}

// lagging is a receipt pipeline whose partition of account has received
// more than it processed; every other account's partition is idle.
type lagging struct {
	account             string
	appended, processed atomic.Int64
	asked               chan struct{}
}

func (l *lagging) Appended(accountID string) int64 {
	if accountID != l.account {
		return 0
	}
	return l.appended.Load()
}
func (l *lagging) Processed(accountID string) int64 {
	if accountID != l.account {
		return 0
	}
	select {
	case l.asked <- struct{}{}:
	default:
	}
	return l.processed.Load()
}
func (l *lagging) MergePaused() bool { return false }

// TestCompensationWaitsForReceiptBacklog: after the quiet period, while
// statuses already received are still being processed, the compensator
// waits instead of resending; the status, once processed, resolves it.
func TestCompensationWaitsForReceiptBacklog(t *testing.T) {
	sp := newSwitching(t)
	clk := fakeclock.New()
	e := newEnv(t, envOpts{
		clock:    clk,
		simCfg:   sim.Config{Faults: sim.Faults{SlowAccept: 1, SlowDelay: 600 * time.Millisecond}},
		settings: map[string]string{"quiet_period": "2s"},
		provider: func(outbound.Provider) outbound.Provider { return sp },
	})
	lag := &lagging{account: "acc", asked: make(chan struct{}, 1)}
	lag.appended.Store(10)
	lag.processed.Store(5)
	e.d.SetReceiptProgress(lag)
	e.addAccount("acc", "3005", 100, 10, sim.Limits{Rate: 1000})
	m := textMsg(t, admit.Request{AccountID: "acc", To: "15552227777"})
	e.submit(m)
	waitUnknown(t, e, "acc", m.ID)
	// After the quiet period, and at each look while the backlog lasts
	// (less than another quiet period), the compensator resends nothing.
	for _, wait := range []time.Duration{2 * time.Second, 200 * time.Millisecond, time.Second} {
		e.elapse(clk, wait)
		select {
		case <-lag.asked:
		case <-time.After(10 * time.Second):
			t.Fatal("the compensator never asked how far the receipt pipeline is")
		}
		settle(t, e, "acc")
		if got := sp.calls.Load(); got != 1 {
			t.Fatalf("resent while receipts were still being processed: %d calls", got)
		}
	}
	e.waitAccepted(1, 10*time.Second)
	wamid := e.sim.Messages("3005", "")[0].WAMID
	if ok, err := e.store.UpdateMessage(context.Background(), store.MessageUpdate{MsgID: m.ID,
		From: []wamux.Status{wamux.StatusUnknown}, Status: wamux.StatusSent, WAMID: wamid}); err != nil || !ok {
		t.Fatalf("resolve: %v %v", ok, err)
	}
	lag.processed.Store(10)
	e.elapse(clk, 200*time.Millisecond)
	testwait.For(t, "compensation resolved", 10*time.Second, func() bool {
		return metric(t, e, "wamux_resends_total", map[string]string{"outcome": "resolved"}) == 1
	})
	if got := sp.calls.Load(); got != 1 || e.sim.Stats().Totals.Duplicates != 0 {
		t.Fatalf("provider called %d times, duplicates %d", got, e.sim.Stats().Totals.Duplicates)
	}
}
