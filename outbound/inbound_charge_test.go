package outbound_test

import (
	"context"
	"fmt"
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

// TestInboundChargedKeepsSendsUnderTheNumbersLimit: Meta counts the
// messages users send to a number against the same throughput as ours
// (reference §3). Users write at half the number's rate (20/s) while a
// backlog waits to be sent; the inbound messages come as signed webhooks
// from the simulator through the real webhook endpoint and receipt
// pipeline. When the pipeline charges them to the account's bucket, our
// sends take the other half and the simulator never answers 130429;
// without the charge the gateway sends at its full rate on top of the
// users' messages and gets throttled.
func TestInboundChargedKeepsSendsUnderTheNumbersLimit(t *testing.T) {
	t.Run("charged", func(t *testing.T) {
		st := runInboundScenario(t, true)
		if st.OverLimit != 0 {
			t.Fatalf("with inbound charged the simulator refused %d sends with 130429 (%d inbound, %d accepted); want none",
				st.OverLimit, st.Inbound, st.Accepted)
		}
		// The other half of the budget is used: 2 at the start, then
		// one per 100 ms.
		if st.Accepted < 35 {
			t.Fatalf("with inbound charged only %d sends were accepted in 4 s at 20/s beside 40 inbound, want about 41", st.Accepted)
		}
	})
	t.Run("not charged", func(t *testing.T) {
		st := runInboundScenario(t, false)
		if st.OverLimit == 0 {
			t.Fatalf("without the charge the simulator never throttled (%d inbound, %d accepted); the scenario proves nothing",
				st.Inbound, st.Accepted)
		}
	})
}

// runInboundScenario runs 4 s of fake time in steps of 100 ms: at each
// step the gateway sends what its bucket allows, then one user writes to
// the number, and the step ends once the inbound webhook is answered.
// The clock is shared by the dispatcher, the receipt pipeline and the
// simulator and stands still within a step, so the simulator counts
// exactly what the gateway's limiter decided.
func runInboundScenario(t *testing.T, charge bool) sim.NumberStats {
	const (
		secret = "app-secret"
		pnid   = "7701"
		steps  = 40
		step   = 100 * time.Millisecond
	)
	clk := fakeclock.New()
	var gateway atomic.Pointer[http.Handler]
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := gateway.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	}))
	t.Cleanup(hooks.Close)
	e := newEnv(t, envOpts{clock: clk, simCfg: sim.Config{Clock: clk.Now,
		Webhooks: sim.Webhooks{URL: hooks.URL + "/webhook", AppSecret: secret, RetryBase: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond}}})

	pcfg := receipts.Config{Store: e.store, Registry: prometheus.NewRegistry(), Settings: e.settings, Logger: quietLog(), Now: clk.Now}
	if charge {
		pcfg.OnInbound = e.d.ChargeInbound
	}
	pipe, err := receipts.New(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := pipe.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pipe.Stop(ctx)
	})
	// The simulator stops posting before the pipeline stops.
	t.Cleanup(func() { e.sim.Close() })
	api, err := httpapi.New(httpapi.Config{Store: e.store, Logger: quietLog(), Registry: prometheus.NewRegistry(),
		Receipts: pipe, AppSecret: secret})
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = api
	gateway.Store(&h)

	// The number allows 20/s with a burst of a second, as Meta's
	// per-second limit; the gateway's bucket is the same rate with a
	// small burst.
	e.addAccount("acc", pnid, 20, 2, sim.Limits{Rate: 20, Burst: 20})
	var msgs []wamux.Message
	for i := range 200 {
		msgs = append(msgs, textMsg(t, admit.Request{AccountID: "acc", To: fmt.Sprintf("1555770%04d", i)}))
	}
	e.submit(msgs...)

	// idle returns once the worker has sent everything its limits allow
	// at this instant and every send has been answered.
	idle := func() {
		t.Helper()
		for {
			e.d.Settle("acc")
			testwait.For(t, "sends answered", 10*time.Second, func() bool { return e.d.AttemptsRunning("acc") == 0 })
			before := e.sim.Stats().Totals.Requests
			e.d.Settle("acc")
			if e.d.AttemptsRunning("acc") == 0 && e.sim.Stats().Totals.Requests == before {
				return
			}
		}
	}
	for range steps {
		idle()
		if _, err := e.sim.Inbound(pnid, sim.InboundRequest{}); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, "webhooks answered", 10*time.Second, func() bool { return e.sim.Stats().Webhooks.Pending == 0 })
		clk.Advance(step)
	}
	idle()
	st := e.sim.Stats()
	if st.Webhooks.GaveUp != 0 || st.Webhooks.Dropped != 0 {
		t.Fatalf("webhooks given up %d, dropped %d; want every one answered", st.Webhooks.GaveUp, st.Webhooks.Dropped)
	}
	return st.Numbers[pnid]
}
