package retention_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/retention"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/sqlite"
)

type bundle struct {
	st      *sqlite.Store
	clock   *fakeclock.Clock
	pruner  *retention.Pruner
	reg     *prometheus.Registry
	keepFor time.Duration
}

func newBundle(t *testing.T, batch int) *bundle {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "wamux.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b := &bundle{st: st, clock: fakeclock.New(), reg: prometheus.NewRegistry(), keepFor: 30 * 24 * time.Hour}
	b.pruner, err = retention.New(retention.Config{Store: st, Retention: func() time.Duration { return b.keepFor },
		Registry: b.reg, Batch: batch, Every: time.Minute, Clock: b.clock})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// received stores n messages of account a received age before the clock.
func (b *bundle) received(t *testing.T, prefix string, n int, age time.Duration) {
	t.Helper()
	at := b.clock.Now().Add(-age)
	ms := make([]store.InboundMessage, n)
	for i := range ms {
		ms[i] = store.InboundMessage{AccountID: "a", WAMID: fmt.Sprintf("%s%d", prefix, i), Type: "text", From: "1",
			SentAt: at, ReceivedAt: at}
	}
	if _, err := b.st.AddInboundMessages(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
}

func (b *bundle) left(t *testing.T) int {
	t.Helper()
	ms, _, err := b.st.ListInbound(context.Background(), store.InboundFilter{AccountID: "a", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}

// TestPruneDeletesOnlyWhatIsOlderThanTheRetention: a round deletes, in
// batches, every message received before the retention period and keeps
// the rest; the counter counts them; the period is read at each round.
func TestPruneDeletesOnlyWhatIsOlderThanTheRetention(t *testing.T) {
	b := newBundle(t, 3)
	b.received(t, "old", 7, 31*24*time.Hour)
	b.received(t, "new", 4, 29*24*time.Hour)
	n, err := b.pruner.Prune(context.Background())
	if err != nil || n != 7 {
		t.Fatalf("pruned %d, %v; want the 7 older than 30 days, in batches of 3", n, err)
	}
	if got := b.left(t); got != 4 {
		t.Fatalf("%d left, want 4", got)
	}
	if got := prunedTotal(t, b.reg); got != 7 {
		t.Fatalf("wamux_inbound_pruned_total = %v, want 7", got)
	}
	b.keepFor = 28 * 24 * time.Hour
	if n, err := b.pruner.Prune(context.Background()); err != nil || n != 4 {
		t.Fatalf("after shortening the retention pruned %d, %v; want 4", n, err)
	}
}

// TestPrunerRunsEveryPeriod: started, the pruner runs a round at once and
// then one each period of the clock, until Stop.
func TestPrunerRunsEveryPeriod(t *testing.T) {
	b := newBundle(t, 0)
	b.received(t, "old", 2, 31*24*time.Hour)
	b.pruner.Start()
	defer b.pruner.Stop()
	testwait.For(t, "the first round", 10*time.Second, func() bool { return b.left(t) == 0 && b.clock.Pending() == 1 })
	b.received(t, "aging", 3, 30*24*time.Hour-30*time.Second)
	b.clock.Advance(time.Minute)
	testwait.For(t, "a round after a period", 10*time.Second, func() bool { return b.left(t) == 0 })
	if got := prunedTotal(t, b.reg); got != 5 {
		t.Fatalf("wamux_inbound_pruned_total = %v, want 5", got)
	}
}

// prunedTotal reads wamux_inbound_pruned_total from reg.
func prunedTotal(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "wamux_inbound_pruned_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("wamux_inbound_pruned_total is not registered")
	return 0
}
