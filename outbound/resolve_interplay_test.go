package outbound_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/outbound"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/sim"
)

// End to end with the real dispatcher, receipt pipeline and simulator: the
// first send times out (the simulator accepted it as wA). The account's
// agent reports wA delivered (agents carry no callback data), then Meta's
// webhook reports wA sent with biz_opaque_callback_data = msg_id, all
// within the quiet period. The status proves the send was accepted, so the
// compensator must not resend it: one call to the provider, no duplicate.
func TestUnknownResolvedByWeakerCallbackStatus(t *testing.T) {
	sp := newSwitching(t)
	clk := fakeclock.New() // the quiet period ends when the test moves it
	e := newEnv(t, envOpts{
		clock:    clk,
		simCfg:   sim.Config{Faults: sim.Faults{SlowAccept: 1, SlowDelay: 600 * time.Millisecond}},
		settings: map[string]string{"quiet_period": "5s"},
		provider: func(outbound.Provider) outbound.Provider { return sp },
	})
	p, err := receipts.New(receipts.Config{Store: e.store, Registry: prometheus.NewRegistry(), Logger: quietLog(),
		BatchWait: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(context.Background()) })
	e.d.SetReceiptProgress(p)
	e.addAccount("acc", "3901", 100, 10, sim.Limits{Rate: 1000})
	m := textMsg(t, admit.Request{AccountID: "acc", To: "15552229999"})
	e.submit(m)
	waitUnknown(t, e, "acc", m.ID)
	e.waitAccepted(1, 10*time.Second)
	wamid := e.sim.Messages("3901", "")[0].WAMID
	now := time.Now()
	if _, err := p.Ingest(context.Background(), "agent", []wamux.Receipt{{AccountID: "acc", MessageID: wamid,
		Type: wamux.ReceiptDelivered, EventTime: now}}); err != nil {
		t.Fatal(err)
	}
	// The agent's receipt is processed first (unmatched: no message has wA yet).
	fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer fcancel()
	if err := p.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Ingest(context.Background(), "webhook", []wamux.Receipt{{AccountID: "acc", MessageID: wamid,
		Type: wamux.ReceiptSent, EventTime: now.Add(-time.Second), CallbackData: m.ID}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	e.elapse(clk, 5*time.Second)
	testwait.For(t, "compensation decided", 20*time.Second, func() bool {
		return metric(t, e, "wamux_resends_total", map[string]string{"outcome": "resolved"})+
			metric(t, e, "wamux_resends_total", map[string]string{"outcome": "resent"}) >= 1
	})
	if resent := metric(t, e, "wamux_resends_total", map[string]string{"outcome": "resent"}); resent != 0 {
		t.Fatalf("resent %v times although a status naming it arrived within the quiet period", resent)
	}
	if got := sp.calls.Load(); got != 1 || e.sim.Stats().Totals.Duplicates != 0 {
		t.Fatalf("resent although a status naming it arrived within the quiet period: provider called %d times, duplicates %d, status %s",
			got, e.sim.Stats().Totals.Duplicates, e.status(m.ID))
	}
	if st := e.status(m.ID); st != wamux.StatusDelivered {
		t.Fatalf("status %s, want delivered", st)
	}
}

// End to end as above, but Meta's webhook reports the very status the
// agent reported (wA delivered: same message, account and type), now with
// biz_opaque_callback_data = msg_id. The dedup layers remember the agent's
// copy; they must not drop the webhook's as its repeat, since only it
// names the unknown message: one call to the provider, no resend. Once in
// L1; once with L1 forgotten (one id per account) and a Bloom filter that
// says "maybe" to every key, whose hit the store must deny.
func TestUnknownResolvedByWebhookCopyOfAgentStatus(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  receipts.Config
		// forget pushes the agent's copy out of L1.
		forget bool
	}{
		{name: "L1"},
		{name: "BloomMaybe", cfg: receipts.Config{LRU: receipts.LRUConfig{PerAccount: 1},
			Bloom: receipts.BloomConfig{ExpectedPerHour: 1, FalsePositiveRate: 0.999}}, forget: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sp := newSwitching(t)
			clk := fakeclock.New() // the quiet period ends when the test moves it
			e := newEnv(t, envOpts{
				clock:    clk,
				simCfg:   sim.Config{Faults: sim.Faults{SlowAccept: 1, SlowDelay: 600 * time.Millisecond}},
				settings: map[string]string{"quiet_period": "5s"},
				provider: func(outbound.Provider) outbound.Provider { return sp },
			})
			cfg := c.cfg
			cfg.Store, cfg.Registry, cfg.Logger, cfg.BatchWait = e.store, prometheus.NewRegistry(), quietLog(), 5*time.Millisecond
			p, err := receipts.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Stop(context.Background()) })
			e.d.SetReceiptProgress(p)
			e.addAccount("acc", "3902", 100, 10, sim.Limits{Rate: 1000})
			m := textMsg(t, admit.Request{AccountID: "acc", To: "15552228888"})
			e.submit(m)
			waitUnknown(t, e, "acc", m.ID)
			e.waitAccepted(1, 10*time.Second)
			wamid := e.sim.Messages("3902", "")[0].WAMID
			agent := wamux.Receipt{AccountID: "acc", MessageID: wamid, Type: wamux.ReceiptDelivered, EventTime: time.Now()}
			ingestAndFlush(t, p, "agent", agent)
			if c.forget {
				fill := make([]wamux.Receipt, 64)
				for i := range fill {
					fill[i] = wamux.Receipt{AccountID: "acc", MessageID: fmt.Sprint("w-other-", i), Type: wamux.ReceiptSent, EventTime: time.Now()}
				}
				ingestAndFlush(t, p, "webhook", fill...)
			}
			webhook := agent
			webhook.CallbackData = m.ID
			ingestAndFlush(t, p, "webhook", webhook)
			e.elapse(clk, 5*time.Second)
			testwait.For(t, "compensation decided", 20*time.Second, func() bool {
				return metric(t, e, "wamux_resends_total", map[string]string{"outcome": "resolved"})+
					metric(t, e, "wamux_resends_total", map[string]string{"outcome": "resent"}) >= 1
			})
			if got := sp.calls.Load(); got != 1 || e.sim.Stats().Totals.Duplicates != 0 {
				t.Fatalf("resent although the webhook's status naming it arrived within the quiet period: provider called %d times, duplicates %d, status %s, pipeline %+v",
					got, e.sim.Stats().Totals.Duplicates, e.status(m.ID), p.Stats())
			}
			if st := e.status(m.ID); st != wamux.StatusDelivered {
				t.Fatalf("status %s, want delivered", st)
			}
		})
	}
}

// ingestAndFlush ingests rs from source and waits until they are processed.
func ingestAndFlush(t *testing.T, p *receipts.Pipeline, source string, rs ...wamux.Receipt) {
	t.Helper()
	if _, err := p.Ingest(context.Background(), source, rs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}
