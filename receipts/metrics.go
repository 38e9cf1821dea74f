package receipts

import (
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Dedup layers, the values of the "layer" label.
const (
	LayerBatch = "batch" // a repeat inside one ingested or processed batch
	LayerLRU   = "lru"   // L1, before the durable append
	LayerBloom = "bloom" // L2 hit confirmed by the store
	LayerStore = "store" // L3: the store's unique key (or a store lookup with Bloom off)
)

// metrics of the receipt pipeline. Labels are bounded: sources, layers,
// decisions, fixed reason names, account ids and partition numbers; never
// phone numbers, wamids or msg_ids.
type metrics struct {
	received       *prometheus.CounterVec
	dedup          *prometheus.CounterVec
	falsePositives prometheus.Counter
	merged         *prometheus.CounterVec
	late           *prometheus.CounterVec
	failures       *prometheus.CounterVec
	deadLetters    *prometheus.CounterVec
	resolved       *prometheus.CounterVec
	inbound        *prometheus.CounterVec
	inboundCharged *prometheus.CounterVec
	latency        prometheus.Histogram
	queued         *prometheus.GaugeVec
	lag            *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_receipts_received_total", Help: "Receipts offered to the pipeline, by source (webhook, agent).",
		}, []string{"source"}),
		dedup: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_receipts_dedup_hits_total", Help: "Receipts recognised as duplicates, by dedup layer (batch, lru, bloom, store).",
		}, []string{"layer"}),
		falsePositives: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wamux_receipts_bloom_false_positives_total", Help: "Bloom hits the store did not confirm: new receipts kept, at the cost of a lookup.",
		}),
		merged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_receipts_merged_total", Help: "New receipts merged into the current status, by decision (apply, ignore, late).",
		}, []string{"decision"}),
		late: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_receipts_late_total", Help: "Out-of-order receipts past the late window, kept in the audit table instead of merged.",
		}, []string{"account"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_receipts_failures_total", Help: "Pipeline failures by reason (store_retry, store_unavailable, poison, stream).",
		}, []string{"reason"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_dead_letters_total", Help: "Input kept as a dead letter instead of processed, by source and reason.",
		}, []string{"source", "reason"}),
		resolved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_receipts_resolved_total", Help: "Merged statuses applied to outbound messages, by result (advanced, adopted, unmatched, stale).",
		}, []string{"result"}),
		inbound: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_inbound_messages_total", Help: "Inbound user messages received by webhook, by account; redeliveries are not counted again.",
		}, []string{"account"}),
		inboundCharged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_inbound_charged_total", Help: "New inbound user messages charged to the account's send rate (timestamp within the charge window), by account.",
		}, []string{"account"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "wamux_receipt_latency_seconds", Help: "From receipt intake to its merge being committed.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wamux_receipts_partition_queued", Help: "Receipts waiting in memory for their partition processor.",
		}, []string{"partition"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wamux_receipts_partition_lag_seconds", Help: "Age of the oldest receipt in the batch a partition processed last; 0 while it has nothing to process.",
		}, []string{"partition"}),
	}
	for _, c := range []prometheus.Collector{m.received, m.dedup, m.falsePositives, m.merged, m.late, m.failures,
		m.deadLetters, m.resolved, m.inbound, m.inboundCharged, m.latency, m.queued, m.lag} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("receipts: register metrics: %w", err)
		}
	}
	return m, nil
}

func partitionLabel(i int) string { return strconv.Itoa(i) }

// Stats are the pipeline's counters since New, for `wamux bench` and
// tests; the same numbers are exported as metrics.
type Stats struct {
	Received            int64
	Appended            int64 // durably appended to the log
	Processed           int64 // log entries processed and acknowledged
	DedupBatch          int64
	DedupLRU            int64
	DedupBloom          int64
	DedupStore          int64
	BloomFalsePositives int64
	Applied             int64
	Ignored             int64
	Late                int64
	DeadLetters         int64
	Retries             int64
	// Spilled receipts were left to the log (queue full or apply_state
	// off); ReadBack counts log entries a partition read back for itself.
	Spilled  int64
	ReadBack int64
}

type counters struct {
	received, appended, processed, batch, lru, bloom, store, fp, applied, ignored, late, dead, retries, spilled, readBack atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Received: c.received.Load(), Appended: c.appended.Load(), Processed: c.processed.Load(),
		DedupBatch: c.batch.Load(), DedupLRU: c.lru.Load(), DedupBloom: c.bloom.Load(), DedupStore: c.store.Load(),
		BloomFalsePositives: c.fp.Load(), Applied: c.applied.Load(), Ignored: c.ignored.Load(), Late: c.late.Load(),
		DeadLetters: c.dead.Load(), Retries: c.retries.Load(), Spilled: c.spilled.Load(), ReadBack: c.readBack.Load(),
	}
}
