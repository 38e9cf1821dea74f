package outbound

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux/settings"
)

// TestSubmitToAcceptBucketsFitLongWaits: the long waits a message
// meets on its way to acceptance (a P2 message accepted just before the
// default p2_max_age sheds it; a message held for a missing seq for the
// default or the largest allowed gap_timeout, 24 h, then resent after
// quiet_period) land in a finite bucket of wamux_submit_to_accept_seconds. Past the last finite bucket
// histogram_quantile answers that bucket's bound, so the dashboard's p99
// would stop at it while the real latency grows.
func TestSubmitToAcceptBucketsFitLongWaits(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	def := settings.Defaults()
	waits := map[string]time.Duration{
		"p2_max_age":                 def.P2MaxAge,
		"gap_timeout + quiet_period": def.GapTimeout + def.QuietPeriod,
		"24h gap_timeout + quiet":    24*time.Hour + def.QuietPeriod,
	}
	for _, d := range waits {
		m.acceptLatency.WithLabelValues("P2").Observe(d.Seconds())
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "wamux_submit_to_accept_seconds" {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		var top float64
		var inFinite uint64
		for _, b := range h.GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) {
				top, inFinite = b.GetUpperBound(), b.GetCumulativeCount()
			}
		}
		if inFinite != h.GetSampleCount() {
			t.Fatalf("the last finite bucket ends at %gs; waits %v do not all fit", top, waits)
		}
		return
	}
	t.Fatal("wamux_submit_to_accept_seconds not gathered")
}
