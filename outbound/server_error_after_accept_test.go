package outbound_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/sim"
)

const hookSecret = "app-secret-5xx"

// lateHandler serves the gateway's webhook once it exists: the simulator
// needs the URL before the env (and so the store behind the handler) is
// built. Until then it answers 503 and the simulator redelivers.
type lateHandler struct{ h atomic.Pointer[http.Handler] }

func (l *lateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := l.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
}

// serveWebhooks builds the real /webhook handler and receipt pipeline on
// e's store, as the app does, the dispatcher's compensator waiting for the
// pipeline's backlog; open puts the handler behind hook.
func serveWebhooks(t *testing.T, e *env, hook *lateHandler) (open func()) {
	t.Helper()
	reg := prometheus.NewRegistry()
	p, err := receipts.New(receipts.Config{Store: e.store, Registry: reg, Logger: quietLog(), BatchWait: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(context.Background()) })
	api, err := httpapi.New(httpapi.Config{Store: e.store, Registry: reg, Logger: quietLog(), Receipts: p, AppSecret: hookSecret})
	if err != nil {
		t.Fatal(err)
	}
	e.d.SetReceiptProgress(p)
	var h http.Handler = api
	return func() { hook.h.Store(&h) }
}

// TestServerErrorAfterAcceptResolvedByWebhook: Meta accepted the message
// but answered 500 (131000), an unknown outcome. Its status webhooks, with
// biz_opaque_callback_data = msg_id, come back through /webhook while the
// quiet period runs (the dispatcher's clock is frozen until they are
// applied): the compensator finds it resolved and sends nothing again.
// Once with the webhook endpoint answering only after the message is
// unknown (the simulator redelivers), once answering from the start (the
// statuses may then overtake the handling of the 500).
func TestServerErrorAfterAcceptResolvedByWebhook(t *testing.T) {
	for _, c := range []struct {
		name      string
		openFirst bool
	}{{"StatusAfterUnknown", false}, {"WebhooksFromStart", true}} {
		t.Run(c.name, func(t *testing.T) {
			clk := fakeclock.New()
			hook := &lateHandler{}
			hs := httptest.NewServer(hook)
			t.Cleanup(hs.Close)
			e := newEnv(t, envOpts{
				clock: clk,
				simCfg: sim.Config{Faults: sim.Faults{ServerErrorAfterAccept: 1},
					Webhooks: sim.Webhooks{URL: hs.URL + "/webhook", AppSecret: hookSecret, RetryBase: time.Millisecond, RetryMax: 10 * time.Millisecond}},
				settings: map[string]string{"quiet_period": "1m"},
			})
			open := serveWebhooks(t, e, hook)
			if c.openFirst {
				open()
			}
			e.addAccount("acc", "3801", 100, 10, sim.Limits{Rate: 1000})
			m := textMsg(t, admit.Request{AccountID: "acc", To: "15553801001"})
			e.submit(m)
			if !c.openFirst {
				testwait.For(t, "message unknown", 10*time.Second, func() bool { return e.status(m.ID) == wamux.StatusUnknown })
				open()
			}
			testwait.For(t, "the message delivered by its status webhooks", 10*time.Second, func() bool {
				return e.status(m.ID) == wamux.StatusDelivered
			})
			// Now let the quiet period pass, until the compensator has
			// decided (or has sent it again).
			testwait.For(t, "compensation decided", 10*time.Second, func() bool {
				clk.Advance(time.Minute)
				e.d.Kick()
				return metric(t, e, "wamux_resends_total", map[string]string{"outcome": "resolved"})+
					metric(t, e, "wamux_resends_total", map[string]string{"outcome": "resent"}) >= 1 ||
					e.sim.Stats().Totals.Requests > 1
			})
			st := e.sim.Stats()
			if resent := metric(t, e, "wamux_resends_total", map[string]string{"outcome": "resent"}); resent != 0 ||
				st.Totals.Requests != 1 || st.Totals.Duplicates != 0 {
				t.Fatalf("resent although its status arrived within the quiet period: resends %v, sim requests %d, duplicates %d",
					resent, st.Totals.Requests, st.Totals.Duplicates)
			}
			if st.Totals.Faults["server_error_after_accept"] != 1 {
				t.Fatalf("the fault did not fire: %+v", st.Totals)
			}
			got, err := e.store.GetMessage(context.Background(), m.ID)
			if err != nil {
				t.Fatal(err)
			}
			msgs := e.sim.Messages("3801", "")
			if len(msgs) != 1 || got.Status != wamux.StatusDelivered || got.WAMID != msgs[0].WAMID {
				t.Fatalf("message %s with wamid %q; simulator accepted %+v", got.Status, got.WAMID, msgs)
			}
		})
	}
}

// TestServerErrorAfterAcceptResentAfterQuietPeriod: the same answer, but
// no status comes (no webhooks): after the quiet period the message is
// resent once with the same msg_id and counted; the simulator, which had
// accepted the first, records the resend as a duplicate.
func TestServerErrorAfterAcceptResentAfterQuietPeriod(t *testing.T) {
	clk := fakeclock.New()
	e := newEnv(t, envOpts{
		clock:    clk,
		simCfg:   sim.Config{Faults: sim.Faults{ServerErrorAfterAccept: 1}},
		settings: map[string]string{"quiet_period": "1m"},
	})
	e.addAccount("acc", "3802", 100, 10, sim.Limits{Rate: 1000})
	m := textMsg(t, admit.Request{AccountID: "acc", To: "15553802001"})
	e.submit(m)
	testwait.For(t, "message unknown", 10*time.Second, func() bool { return e.status(m.ID) == wamux.StatusUnknown })
	if n := e.sim.Stats().Totals.Requests; n != 1 {
		t.Fatalf("sim requests %d before the quiet period passed, want 1", n)
	}
	// The resend is answered normally.
	if err := e.sim.SetFaults("3802", sim.Faults{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "message accepted after the resend", 10*time.Second, func() bool {
		clk.Advance(time.Minute)
		e.d.Kick()
		return e.status(m.ID) == wamux.StatusAccepted
	})
	if got := metric(t, e, "wamux_resends_total", map[string]string{"outcome": "resent"}); got != 1 {
		t.Fatalf("resends = %v, want 1", got)
	}
	if got := metric(t, e, "wamux_resends_total", map[string]string{"outcome": "resolved"}); got != 0 {
		t.Fatalf("resolved = %v, want 0 (no status came)", got)
	}
	st := e.sim.Stats().Totals
	msgs := e.sim.Messages("3802", "")
	if st.Requests != 2 || st.Duplicates != 1 || len(msgs) != 2 ||
		msgs[0].CallbackData != m.ID || msgs[1].CallbackData != m.ID || msgs[0].Duplicate || !msgs[1].Duplicate {
		t.Fatalf("simulator: requests %d, duplicates %d, messages %+v; want the resend of %s as the one duplicate",
			st.Requests, st.Duplicates, msgs, m.ID)
	}
	got, err := e.store.GetMessage(context.Background(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.WAMID != msgs[1].WAMID {
		t.Fatalf("wamid %q, want the resend's %q", got.WAMID, msgs[1].WAMID)
	}
}
