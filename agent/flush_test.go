package agent

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/testwait"
)

// FlushEvents receipts start a send without waiting for the timer.
func TestFlushOnEventCount(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	a := newTestAgent(t, g, t.TempDir(), func(c *Config) { c.FlushInterval = time.Hour })
	rs := testReceipts("count", 75)
	reportAll(t, a, rs[:50])
	testwait.For(t, "50 receipts acknowledged", 20*time.Second, func() bool { return a.Stats().Acked == 50 })
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
	testwait.For(t, "three receipts acknowledged", 20*time.Second, func() bool { return a.Stats().Acked == 3 })
	// The timer may fire between two Reports, so the split varies; what
	// matters is that the receipts went out before Close.
	closeAgent(t, a)
	g.wantStored(t, rs)
}

// The largest batch of the worst ids the agent accepts still fits the
// gateway's 8 MiB body limit.
func TestLargestBatchFitsBodyLimit(t *testing.T) {
	t.Parallel()
	for name, fill := range map[string]string{
		"control characters": "\x01", // escaped to \u0001
		"html characters":    "<",    // escaped to \u003c
		// Invalid UTF-8 (JSON's \ufffd) is refused by Report.
	} {
		recs := make([]record, MaxBatchLimit)
		for i := range recs {
			id := fmt.Sprintf("wamid.%04d.", i)
			r := Receipt{MessageID: id + strings.Repeat(fill, MaxMessageIDLen-len(id)),
				Type: wamux.ReceiptDelivered, EventTime: time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC), Version: 2}
			if err := r.validate(r.EventTime); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			recs[i] = newRecord(r)
			recs[i].Seq = math.MaxUint64
			if _, err := appendRecord(nil, recs[i]); err != nil {
				t.Fatalf("%s: the worst receipt does not fit a spool record: %v", name, err)
			}
		}
		body, err := encodeBatch(strings.Repeat("\x01", MaxAccountIDLen), recs)
		if err != nil {
			t.Fatal(err)
		}
		if len(body) > 8<<20 || len(body) < 5<<20 {
			t.Errorf("%s: worst-case body is %d bytes, want between 5 MiB (near the worst case) and 8 MiB", name, len(body))
		}
	}
}
