package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux"
)

// FlushEvents receipts start a send without waiting for the timer.
func TestFlushOnEventCount(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	a := newTestAgent(t, g, t.TempDir(), func(c *Config) { c.FlushInterval = time.Hour })
	rs := testReceipts("count", 75)
	reportAll(t, a, rs[:50])
	waitFor(t, func() bool { return a.Stats().Acked == 50 })
	if sizes := g.counts().sizes; !slices.Equal(sizes, []int{50}) {
		t.Fatalf("batches = %v, want one of 50", sizes)
	}
	// 25 more stay below FlushEvents and the timer is an hour away: only
	// Close sends them.
	reportAll(t, a, rs[50:])
	closeAgent(t, a)
	if sizes := g.counts().sizes; !slices.Equal(sizes, []int{50, 25}) {
		t.Fatalf("batches = %v, want 50 then 25", sizes)
	}
	g.wantStored(t, rs)
}

// Fewer than FlushEvents receipts go out when the timer fires.
func TestFlushOnInterval(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	a := newTestAgent(t, g, t.TempDir(), func(c *Config) { c.FlushInterval = 10 * time.Millisecond })
	rs := testReceipts("interval", 3)
	reportAll(t, a, rs)
	waitFor(t, func() bool { return a.Stats().Acked == 3 })
	// The timer may fire between two Reports, so the split varies; what
	// matters is that the receipts went out before Close.
	closeAgent(t, a)
	g.wantStored(t, rs)
}

// The largest batch of the worst ids the agent accepts still fits the
// gateway's 8 MiB body limit.
func TestLargestBatchFitsBodyLimit(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	a := newTestAgent(t, g, t.TempDir(), func(c *Config) {
		c.MaxBatch, c.FlushEvents, c.FlushInterval = MaxBatchLimit, MaxBatchLimit, time.Hour
	})
	rs := make([]Receipt, MaxBatchLimit)
	for i := range rs {
		// Control characters are escaped to six bytes each in JSON.
		id := fmt.Sprintf("wamid.%04d.", i)
		rs[i] = Receipt{MessageID: id + strings.Repeat("\x01", MaxMessageIDLen-len(id)),
			Type: wamux.ReceiptRead, EventTime: time.UnixMilli(1_764_000_000_000)}
	}
	// Many reporters make large write groups: fewer fsyncs.
	var wg sync.WaitGroup
	for w := range 50 {
		wg.Go(func() {
			for i := w; i < len(rs); i += 50 {
				if err := a.Report(context.Background(), rs[i]); err != nil {
					t.Errorf("Report: %v", err)
				}
			}
		})
	}
	wg.Wait()
	closeAgent(t, a)
	if c := g.counts(); !slices.Equal(c.sizes, []int{MaxBatchLimit}) {
		t.Fatalf("batches = %v (%d requests), want one of %d", c.sizes, c.requests, MaxBatchLimit)
	}
	g.wantStored(t, rs)
}
