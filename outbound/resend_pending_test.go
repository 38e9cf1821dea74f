package outbound_test

import (
	"context"
	"net/http/httptest"
	"slices"
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
)

// TestLateStatusResolvesThrottledResend: Meta accepted a message but
// answered 500 (131000), an unknown outcome; no status came within the
// quiet period, so the compensator resends it, and Meta refuses the
// resend with a throttle (130429), which proves only that the resend was
// not sent. The first send's status webhooks, carrying the msg_id as
// callback data, arrive while the resend waits for its retry: they must
// still resolve the message, which is not sent a second time. The outcome
// of the first send is as unknown as before the throttled resend: it is
// neither resent (P1) nor shed as dropped (P2 past p2_max_age).
func TestLateStatusResolvesThrottledResend(t *testing.T) {
	for _, prio := range []string{"P1", "P2"} {
		t.Run(prio, func(t *testing.T) {
			clk := fakeclock.New()
			hook := &lateHandler{}
			hs := httptest.NewServer(hook)
			t.Cleanup(hs.Close)
			e := newEnv(t, envOpts{
				clock: clk,
				simCfg: sim.Config{Faults: sim.Faults{ServerErrorAfterAccept: 1},
					Webhooks: sim.Webhooks{URL: hs.URL + "/webhook", AppSecret: hookSecret, RetryBase: time.Millisecond, RetryMax: 10 * time.Millisecond}},
				settings: map[string]string{"quiet_period": "1m", "p2_max_age": "1m"},
			})
			open := serveWebhooks(t, e, hook)
			e.addAccount("acc", "3901", 100, 10, sim.Limits{Rate: 1000})
			m := textMsg(t, admit.Request{AccountID: "acc", Priority: prio, To: "15553901001"})
			e.submit(m)
			// Its quiet period runs from when the worker has the answer.
			testwait.For(t, "message unknown", 10*time.Second, func() bool {
				return e.status(m.ID) == wamux.StatusUnknown && e.d.AttemptsRunning("acc") == 0
			})
			e.d.Settle("acc")
			// The resend is refused by a throttle.
			if err := e.sim.SetFaults("3901", sim.Faults{Codes: map[int]float64{130429: 1}}); err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Minute + time.Second)
			e.d.Kick()
			testwait.For(t, "the resend refused", 10*time.Second, func() bool {
				return e.sim.Stats().Totals.Requests == 2 && e.d.AttemptsRunning("acc") == 0
			})
			if err := e.sim.SetFaults("3901", sim.Faults{}); err != nil {
				t.Fatal(err)
			}
			// Now the first send's statuses come through /webhook.
			first := e.sim.Messages("3901", "")
			if len(first) != 1 {
				t.Fatalf("simulator accepted %+v, want the first send only", first)
			}
			open()
			// The delivered state alone may be stored before the sent
			// status that carries the msg_id has come: wait for the
			// message itself.
			testwait.For(t, "the first send's statuses resolve the message", 10*time.Second, func() bool {
				return e.status(m.ID) == wamux.StatusDelivered
			})
			// Let the throttle's wait and any cooldown pass, until the
			// message is resolved or sent again.
			testwait.For(t, "the message resolved or resent", 10*time.Second, func() bool {
				clk.Advance(time.Minute)
				e.d.Kick()
				st := e.status(m.ID)
				return (st != wamux.StatusQueued && st != wamux.StatusUnknown && st != wamux.StatusSending) ||
					e.sim.Stats().Totals.Requests > 2
			})
			e.d.Settle("acc")
			got := e.message(m.ID)
			st := e.sim.Stats().Totals
			if st.Requests != 2 || st.Duplicates != 0 {
				t.Fatalf("sent again after the first send's status arrived: sim requests %d, duplicates %d (message %s)",
					st.Requests, st.Duplicates, got.Status)
			}
			if got.Status != wamux.StatusDelivered || got.WAMID != first[0].WAMID {
				t.Fatalf("message %s with wamid %q, want delivered with the first send's %q", got.Status, got.WAMID, first[0].WAMID)
			}
		})
	}
}

// sequencedProvider answers the calls to a recipient with the listed
// results in turn, and passes the rest (and every call after the list)
// to the real client.
type sequencedProvider struct {
	base    outbound.Provider
	mu      sync.Mutex
	answers map[string][]cloudapi.Result
	calls   map[string]int
}

func (p *sequencedProvider) Send(ctx context.Context, dest cloudapi.Destination, msg wamux.Message) cloudapi.Result {
	p.mu.Lock()
	p.calls[msg.To]++
	var r cloudapi.Result
	scripted := len(p.answers[msg.To]) > 0
	if scripted {
		r = p.answers[msg.To][0]
		p.answers[msg.To] = p.answers[msg.To][1:]
	}
	p.mu.Unlock()
	if scripted {
		return r
	}
	return p.base.Send(ctx, dest, msg)
}

func (p *sequencedProvider) callsTo(to string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[to]
}

// TestResendRefusedByDisableStaysOnItsNumber: a routed message's outcome
// on account a is unknown and no status resolves it, so it is resent; the
// provider answers the resend by disabling a (131031, nothing sent). The
// first send may still have reached the customer from a's number, and
// only a's statuses can tell: the message stays on a, as one disabled
// during the quiet period does, and is resent from a once a is enabled
// again, never from b.
func TestResendRefusedByDisableStaysOnItsNumber(t *testing.T) {
	to := "15558900001"
	sp := &sequencedProvider{calls: map[string]int{}, answers: map[string][]cloudapi.Result{to: {
		{Outcome: cloudapi.Unknown, Code: -1, Reason: "timeout"},
		{Outcome: cloudapi.Disable, Code: 131031, HTTPStatus: 400, Reason: "131031: account locked"},
	}}}
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk, settings: map[string]string{"quiet_period": "10s"},
		provider: func(base outbound.Provider) outbound.Provider { sp.base = base; return sp }})
	e.addAccount("a", "8901", 100, 10, sim.Limits{Rate: 1000})
	e.addAccount("b", "8902", 100, 10, sim.Limits{Rate: 1000})
	coolDown(t, e, "b", clk.Now().Add(time.Hour)) // the recipient goes to a
	m := textMsg(t, admit.Request{MsgID: "first", To: to})
	if acc := e.submit(m)[0].Message.AccountID; acc != "a" {
		t.Fatalf("routed to %s, want a", acc)
	}
	testwait.For(t, "first unknown", 10*time.Second, func() bool {
		return e.status(m.ID) == wamux.StatusUnknown && e.d.AttemptsRunning("a") == 0
	})
	e.d.Settle("a")
	setState(t, e, "b", wamux.AccountActive)
	clk.Advance(11 * time.Second)
	e.d.Kick()
	testwait.For(t, "the resend refused by disabling a", 10*time.Second, func() bool {
		a, err := e.store.GetAccount(context.Background(), "a")
		if err != nil {
			t.Fatal(err)
		}
		return sp.callsTo(to) == 2 && a.State == wamux.AccountDisabled && e.d.AttemptsRunning("a") == 0
	})
	e.d.EvacuateNow("a")
	e.d.Settle("b")
	if got := e.message(m.ID); got.AccountID != "a" {
		t.Fatalf("message %s moved to %s after its resend was refused; its first send's outcome on a is unknown", got.Status, got.AccountID)
	}
	if got := sentFrom(e, "8902", to); len(got) != 0 {
		t.Fatalf("b sent %v: the resend must come from a's number", got)
	}
	setState(t, e, "a", wamux.AccountActive)
	testwait.For(t, "resent from a", 10*time.Second, func() bool { return e.status(m.ID) == wamux.StatusAccepted })
	if got := sentFrom(e, "8901", to); !slices.Equal(got, []string{"first"}) {
		t.Fatalf("a sent %v, want [first]", got)
	}
	if n := sp.callsTo(to); n != 3 {
		t.Fatalf("%d provider calls, want 3 (unknown, refused resend, resend)", n)
	}
}
