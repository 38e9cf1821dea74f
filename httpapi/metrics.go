package httpapi

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// webhookRefused counts webhook bodies refused unread or unverified,
	// by reason (refused*).
	webhookRefused *prometheus.CounterVec
}

// Why a webhook body was refused (the reason label of
// wamux_webhook_refused_total).
const (
	refusedSignature  = "signature"  // 401: no app secret, no or a malformed or a wrong signature
	refusedTooLarge   = "too_large"  // 413: declared or read past MaxBodyWebhook
	refusedBusy       = "busy"       // 503: the body gate was full
	refusedUnreadable = "unreadable" // 400: the body did not arrive in time or whole
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_http_requests_total",
			Help: "HTTP requests served, by route pattern and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "wamux_http_request_duration_seconds",
			Help: "Time to serve an HTTP request, by route pattern.",
			// 0.5 ms to 16 s: a request that waits out the store timeout
			// (StoreTimeoutDefault, 10 s) still lands in a finite bucket.
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route"}),
		webhookRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_webhook_refused_total",
			Help: "Webhook bodies refused before they were verified, by reason (signature, too_large, busy, unreadable).",
		}, []string{"reason"}),
	}
	for _, reason := range []string{refusedSignature, refusedTooLarge, refusedBusy, refusedUnreadable} {
		m.webhookRefused.WithLabelValues(reason)
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.webhookRefused} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register http metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) observe(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}
