package outbound_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
)

// pausedReceipts is a receipt pipeline with apply_state off: statuses are
// received (made durable) but wait in its log, unmerged.
type pausedReceipts struct {
	appended, processed atomic.Int64
	paused              atomic.Bool
	looks               atomic.Int64 // calls from the compensator
}

func (p *pausedReceipts) Appended(string) int64 { return p.appended.Load() }
func (p *pausedReceipts) Processed(string) int64 {
	p.looks.Add(1)
	return p.processed.Load()
}
func (p *pausedReceipts) MergePaused() bool {
	p.looks.Add(1)
	return p.paused.Load()
}

// TestCompensationHoldsWhileMergingPaused: Meta accepted a message but
// answered 500, an unknown outcome, and its status came back, but the
// receipt pipeline has merging paused (apply_state off), so the status
// waits unmerged in its log. However long the pause, the compensator must
// not resend a message whose status it may hold. Once merging is back,
// the status resolves it and nothing is sent again.
func TestCompensationHoldsWhileMergingPaused(t *testing.T) {
	clk := fakeclock.New()
	e := newEnv(t, envOpts{
		clock:    clk,
		simCfg:   sim.Config{Faults: sim.Faults{ServerErrorAfterAccept: 1}},
		settings: map[string]string{"quiet_period": "1m"},
	})
	rp := &pausedReceipts{}
	rp.paused.Store(true)
	e.d.SetReceiptProgress(rp)
	e.addAccount("acc", "3903", 100, 10, sim.Limits{Rate: 1000})
	m := textMsg(t, admit.Request{AccountID: "acc", To: "15553903001"})
	e.submit(m)
	testwait.For(t, "message unknown", 10*time.Second, func() bool {
		return e.status(m.ID) == wamux.StatusUnknown && e.d.AttemptsRunning("acc") == 0
	})
	e.d.Settle("acc")
	if err := e.sim.SetFaults("3903", sim.Faults{}); err != nil {
		t.Fatal(err)
	}
	rp.appended.Store(3) // its statuses, received and waiting in the log
	for round := 0; round < 4; round++ {
		looks := rp.looks.Load()
		clk.Advance(time.Minute + time.Second)
		e.d.Kick()
		testwait.For(t, "the compensator looked", 10*time.Second, func() bool {
			return rp.looks.Load() > looks && e.d.AttemptsRunning("acc") == 0
		})
		e.d.Settle("acc")
		if n := e.sim.Stats().Totals.Requests; n != 1 {
			t.Fatalf("round %d: %d sends while merging was paused with statuses waiting, want 1", round, n)
		}
	}
	// Merging resumes: the status resolves the message.
	wamid := e.sim.Messages("3903", "")[0].WAMID
	if ok, err := e.store.UpdateMessage(context.Background(), store.MessageUpdate{MsgID: m.ID,
		From: []wamux.Status{wamux.StatusUnknown}, Status: wamux.StatusDelivered, WAMID: wamid}); err != nil || !ok {
		t.Fatalf("resolve: %v %v", ok, err)
	}
	rp.processed.Store(3)
	rp.paused.Store(false)
	testwait.For(t, "compensation resolved", 10*time.Second, func() bool {
		clk.Advance(time.Minute)
		e.d.Kick()
		return metric(t, e, "wamux_resends_total", map[string]string{"outcome": "resolved"}) == 1
	})
	if st := e.sim.Stats().Totals; st.Requests != 1 || st.Duplicates != 0 {
		t.Fatalf("sim requests %d, duplicates %d; want the one send", st.Requests, st.Duplicates)
	}
}
