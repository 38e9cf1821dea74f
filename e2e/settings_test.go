package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux/bench"
	"github.com/wamux/wamux/sim"
)

func startHarness(t *testing.T) *bench.Harness {
	t.Helper()
	h, err := bench.Start(context.Background(), bench.HarnessConfig{Sim: sim.Config{Seed: 5}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// acceptedIn counts the simulator's acceptances for a number in (from, to]:
// the provider's ground truth, not the gateway's own account of itself.
func acceptedIn(h *bench.Harness, pnid string, from, to time.Time) int {
	n := 0
	for _, m := range h.Sim.Messages(pnid, "") {
		if m.AcceptedAt.After(from) && !m.AcceptedAt.After(to) {
			n++
		}
	}
	return n
}

// lastAccepted is the simulator's latest acceptance time for a number.
func lastAccepted(h *bench.Harness, pnid string) time.Time {
	var last time.Time
	for _, m := range h.Sim.Messages(pnid, "") {
		if m.AcceptedAt.After(last) {
			last = m.AcceptedAt
		}
	}
	return last
}

// TestLowerRateWithoutRestart: an account with a deep queue sends at its
// rate; PATCH /v1/accounts/{id} lowers the rate and the simulator sees
// the new, lower rate within a second, with nothing restarted. The bound
// after the change is the contract's rate × T + burst; before it, the
// account sends far more than that bound allows.
func TestLowerRateWithoutRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := startHarness(t)
	const pnid, before, after = "100200300477", 20.0, 4.0
	if err := h.AddAccount(ctx, "rate-acct", pnid, before, 2, sim.Limits{Rate: 500}); err != nil {
		t.Fatal(err)
	}
	// 400 messages, each to its own recipient so the pair limit never
	// binds: a queue the account cannot empty during the test.
	for b := 0; b < 4; b++ {
		msgs := make([]map[string]any, 100)
		for i := range msgs {
			msgs[i] = map[string]any{"biz_type": "e2e", "account_id": "rate-acct", "to": fmt.Sprintf("4915%08d", b*100+i),
				"type": "text", "text": map[string]any{"body": "hello"}}
		}
		if err := h.Do(ctx, "POST", "/v1/messages:batch", map[string]any{"messages": msgs}, nil); err != nil {
			t.Fatal(err)
		}
	}
	const window = 3 * time.Second
	waitUntilAccepted := func(t0 time.Time) {
		t.Helper()
		poll(t, 30*time.Second, func() error {
			if last := lastAccepted(h, pnid); !last.After(t0) {
				return fmt.Errorf("no acceptance after %s yet (last %s)", t0.Format(time.StampMilli), last.Format(time.StampMilli))
			}
			return nil
		})
	}
	// Warm up past the initial burst, then count one window at the old rate.
	poll(t, 30*time.Second, func() error {
		if n := len(h.Sim.Messages(pnid, "")); n < 10 {
			return fmt.Errorf("%d accepted", n)
		}
		return nil
	})
	t0 := time.Now()
	waitUntilAccepted(t0.Add(window))
	fast := acceptedIn(h, pnid, t0, t0.Add(window))

	if err := h.Do(ctx, "PATCH", "/v1/accounts/rate-acct", map[string]any{"rate_per_sec": after, "burst": 1}, nil); err != nil {
		t.Fatal(err)
	}
	// A second for sends already granted to finish, then one window.
	t1 := time.Now().Add(time.Second)
	waitUntilAccepted(t1.Add(window))
	slow := acceptedIn(h, pnid, t1, t1.Add(window))

	// rate × T + burst, plus a little for arrival jitter: the simulator
	// stamps arrivals, which network scheduling can bunch up.
	bound := int(after*window.Seconds()) + 1 + 3
	t.Logf("accepted in %s: %d at %.0f/s, %d at %.0f/s (bound %d)", window, fast, before, slow, after, bound)
	if slow > bound {
		t.Errorf("after lowering the rate to %.0f/s: %d sends in %s, bound %d", after, slow, window, bound)
	}
	if slow == 0 {
		t.Error("after lowering the rate the account stopped sending")
	}
	if fast <= bound+5 {
		t.Errorf("before the change only %d sends in %s: the test cannot tell the rates apart", fast, window)
	}
}

// dedupHits reads wamux_receipts_dedup_hits_total by layer.
func dedupHits(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "wamux_receipts_dedup_hits_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "layer" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// TestBloomOffWithoutRestart: repeats of receipts the per-account LRU has
// forgotten are caught by the Bloom layer; after PATCH /v1/config
// {"bloom":false} the same kind of repeats are caught by the store lookup
// instead, and the Bloom layer's counter stands still.
func TestBloomOffWithoutRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := startHarness(t)
	if err := h.AddAccount(ctx, "rcpt-acct", "100200300478", 10, 1, sim.Limits{}); err != nil {
		t.Fatal(err)
	}
	pipe := h.App.Receipts()
	base := time.Now().Add(-time.Minute).UnixMilli()
	post := func(from, to int) {
		t.Helper()
		for lo := from; lo < to; lo += 1000 {
			rs := make([]map[string]any, 0, 1000)
			for i := lo; i < min(lo+1000, to); i++ {
				rs = append(rs, map[string]any{"message_id": fmt.Sprintf("wamid.e2e-%05d", i), "type": "delivered", "event_time": base + int64(i)})
			}
			if err := h.Do(ctx, "POST", "/v1/receipts:batch", map[string]any{"account_id": "rcpt-acct", "receipts": rs}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	processed := func(n int64) {
		t.Helper()
		poll(t, 60*time.Second, func() error {
			if p := pipe.Stats().Processed; p < n {
				return fmt.Errorf("%d of %d receipts processed", p, n)
			}
			return nil
		})
	}
	// More distinct receipts than the per-account LRU keeps (5,000), so
	// the oldest are forgotten by L1 and their repeats reach L2.
	const distinct = 6000
	post(0, distinct)
	processed(distinct)
	start := dedupHits(t, h.Registry())

	post(0, 300) // repeats, Bloom on
	processed(distinct + 300)
	on := dedupHits(t, h.Registry())
	if got := on["bloom"] - start["bloom"]; got != 300 {
		t.Fatalf("Bloom on: %v repeats caught by the Bloom layer, want 300 (before %v, after %v)", got, start, on)
	}

	if err := h.Do(ctx, "PATCH", "/v1/config", map[string]any{"bloom": false}, nil); err != nil {
		t.Fatal(err)
	}
	post(300, 600) // repeats, Bloom off
	processed(distinct + 600)
	off := dedupHits(t, h.Registry())
	if got := off["bloom"] - on["bloom"]; got != 0 {
		t.Errorf("Bloom off: the Bloom layer still counted %v hits", got)
	}
	if got := off["store"] - on["store"]; got != 300 {
		t.Errorf("Bloom off: %v repeats caught by the store, want 300 (before %v, after %v)", got, on, off)
	}
}
