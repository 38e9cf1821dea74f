package outbound_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
)

// TestSeqWaitOfAGapTimeoutIsMeasured: a message that waits out the gap
// timeout, the default 5 min or the largest allowed 24 h, must land in a
// finite bucket of wamux_seq_wait_seconds. The buckets ended at 262 s, so
// every such wait fell into +Inf, where a quantile only reads as the last
// finite bound: the p99 the dashboard and docs/metrics.md watch for
// "near gap_timeout" could never show 5 minutes.
func TestSeqWaitOfAGapTimeoutIsMeasured(t *testing.T) {
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk, settings: map[string]string{"gap_timeout": "5m"}})
	e.addAccount("acc", "9602", 100, 100, sim.Limits{Rate: 1000})
	m := func(seq int64) wamux.Message {
		return textMsg(t, admit.Request{AccountID: "acc", ClientSeq: seqp(seq), To: "15559600002"})
	}
	waitOut := func(seq int64, gap time.Duration, accepted int64) {
		t.Helper()
		e.submit(m(seq)) // seq-1 never comes
		testwait.For(t, "the message waiting", 5*time.Second, func() bool {
			return metric(t, e, "wamux_seq_waiting", map[string]string{"account": "acc"}) == 1
		})
		clk.Advance(gap + time.Second)
		e.d.Kick()
		e.waitAccepted(accepted, 10*time.Second)
	}
	waitOut(2, 5*time.Minute, 1)
	if _, err := e.settings.Update(context.Background(), map[string]string{"gap_timeout": "24h"}); err != nil {
		t.Fatal(err)
	}
	waitOut(4, 24*time.Hour, 2)

	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "wamux_seq_wait_seconds" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		var finite uint64
		for _, b := range h.GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) {
				finite = b.GetCumulativeCount() // cumulative: the last finite one counts them all
			}
		}
		if finite != h.GetSampleCount() || h.GetSampleCount() != 2 {
			t.Fatalf("%d of %d waits in finite buckets, want 2 of 2", finite, h.GetSampleCount())
		}
		return
	}
	t.Fatal("no wamux_seq_wait_seconds")
}
