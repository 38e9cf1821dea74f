package events

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the event pipeline's Prometheus series; subscription ids
// label them (operators create few).
type metrics struct {
	written   *prometheus.CounterVec
	delivered *prometheus.CounterVec
	attempts  *prometheus.CounterVec
	failing   *prometheus.GaugeVec
	pending   *prometheus.GaugeVec
	oldest    *prometheus.GaugeVec
	latency   *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		written: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_events_written_total", Help: "Events read from the outbox by the feed watcher, by type.",
		}, []string{"type"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_event_deliveries_delivered_total", Help: "Events an endpoint answered with 2xx, by subscription.",
		}, []string{"subscription"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_event_delivery_attempts_total",
			Help: "Delivery attempts by subscription and result: delivered, retry (to be retried), gone (410, subscription disabled), failed (retry window spent, subscription failing).",
		}, []string{"subscription", "result"}),
		failing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wamux_event_subscription_failing", Help: "1 while a subscription is failing or disabled by its endpoint's 410, else 0.",
		}, []string{"subscription"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wamux_event_deliveries_pending", Help: "Events waiting for delivery to a subscription.",
		}, []string{"subscription"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wamux_event_oldest_pending_seconds", Help: "Age of the oldest event waiting for delivery to a subscription (0 when none).",
		}, []string{"subscription"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "wamux_event_delivery_latency_seconds",
			Help:    "From an event's commit to its endpoint's 2xx, by subscription.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 12),
		}, []string{"subscription"}),
	}
	for _, c := range []prometheus.Collector{m.written, m.delivered, m.attempts, m.failing, m.pending, m.oldest, m.latency} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// forget drops a deleted subscription's series.
func (m *metrics) forget(sub string) {
	l := prometheus.Labels{"subscription": sub}
	m.delivered.DeletePartialMatch(l)
	m.attempts.DeletePartialMatch(l)
	m.failing.DeletePartialMatch(l)
	m.pending.DeletePartialMatch(l)
	m.oldest.DeletePartialMatch(l)
	m.latency.DeletePartialMatch(l)
}
