package receipts_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/store"
)

// charges records what the pipeline hands to OnInbound.
type charges struct {
	mu  sync.Mutex
	got map[string]int
	err error
}

func (c *charges) charge(_ context.Context, account string, n int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	c.got[account] += n
	return nil
}

func (c *charges) of(account string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got[account]
}

// TestInboundChargedWhenNewAndRecent: Meta counts a user's message against
// the number's throughput when it is sent, so the pipeline charges the
// account's send rate for new inbound messages whose timestamp is within
// InboundChargeWindow of now, once each: a redelivery, an old message (a
// backlog after an outage) and one without a timestamp cost nothing.
func TestInboundChargedWhenNewAndRecent(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := &charges{got: map[string]int{}}
	reg := prometheus.NewRegistry()
	p := startPipeline(t, receipts.Config{Store: openSQLite(t), Registry: reg, Now: func() time.Time { return now }, OnInbound: c.charge})
	in := func(account, wamid string, sent time.Time) store.InboundMessage {
		return store.InboundMessage{AccountID: account, WAMID: wamid, Type: "text", SentAt: sent, ReceivedAt: now}
	}
	add := func(ms ...store.InboundMessage) {
		t.Helper()
		if err := p.AddInbound(context.Background(), ms); err != nil {
			t.Fatal(err)
		}
	}
	add(in("a", "w1", now.Add(-time.Second)), in("a", "w2", now), in("b", "w3", now.Add(time.Second)))
	if got := c.of("a"); got != 2 {
		t.Fatalf("two new messages of a, sent 1 s and 0 s ago: charged %d, want 2", got)
	}
	if got := c.of("b"); got != 1 {
		t.Fatalf("a new message of b stamped 1 s ahead (clock skew): charged %d, want 1", got)
	}
	add(in("a", "w1", now.Add(-time.Second)), in("a", "w2", now))
	if got := c.of("a"); got != 2 {
		t.Fatalf("after a redelivery of both: charged %d in all, want still 2", got)
	}
	add(in("a", "old", now.Add(-receipts.InboundChargeWindow)), in("a", "older", now.Add(-time.Hour)), in("a", "none", time.Time{}))
	if got := c.of("a"); got != 2 {
		t.Fatalf("after new messages older than the window or without timestamp: charged %d in all, want still 2", got)
	}
	// Two new, one of them old, beside a recent redelivery: the store
	// says two are new, one of the three is recent.
	add(in("a", "w2", now), in("a", "w4", now), in("a", "old2", now.Add(-time.Minute)))
	if got := c.of("a"); got != 3 {
		t.Fatalf("one new recent message beside an old one and a redelivery: charged %d in all, want 3", got)
	}
	if got := counterOf(t, reg, "wamux_inbound_charged_total", "a"); got != 3 {
		t.Fatalf("wamux_inbound_charged_total{account=a} = %v, want 3", got)
	}

	// A failing charge is logged; the messages are kept all the same.
	c.mu.Lock()
	c.err = errors.New("limiter unavailable")
	c.mu.Unlock()
	add(in("a", "w5", now))
	if got := counterOf(t, reg, "wamux_inbound_messages_total", "a"); got != 8 {
		t.Fatalf("wamux_inbound_messages_total{account=a} = %v after a failed charge, want 8", got)
	}
}

// counterOf reads one account's series of a counter in reg.
func counterOf(t *testing.T, reg *prometheus.Registry, name, account string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "account" && l.GetValue() == account {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series %s{account=%q}", name, account)
	return 0
}
