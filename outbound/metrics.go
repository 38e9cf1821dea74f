package outbound

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of the outbound pipeline. Labels are bounded: account ids,
// priorities, fixed result and reason names; never phone numbers or msg_ids.
type metrics struct {
	submitted     *prometheus.CounterVec
	duplicates    prometheus.Counter
	sends         *prometheus.CounterVec
	retries       *prometheus.CounterVec
	resends       *prometheus.CounterVec
	throttled     *prometheus.CounterVec
	cooldowns     *prometheus.CounterVec
	queueDepth    *prometheus.GaugeVec
	tokens        *prometheus.GaugeVec
	utilization   *prometheus.GaugeVec
	seqWaiting    *prometheus.GaugeVec
	seqWait       prometheus.Histogram
	gapsSkipped   *prometheus.CounterVec
	held          *prometheus.CounterVec
	shed          *prometheus.CounterVec
	acceptLatency *prometheus.HistogramVec
	reroutes      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		submitted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_messages_submitted_total", Help: "Messages accepted by the API as new, by priority.",
		}, []string{"priority"}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wamux_messages_duplicate_total", Help: "Submissions recognised as repeats of a stored msg_id.",
		}),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_sends_total", Help: "Provider send attempts by account and classified result.",
		}, []string{"account", "result"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_send_retries_total", Help: "Messages put back for another attempt, by account and reason.",
		}, []string{"account", "reason"}),
		resends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_resends_total", Help: "Unknown-outcome messages after the quiet period: resent, or resolved by a status.",
		}, []string{"account", "outcome"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_provider_throttled_total", Help: "Provider rate-limit answers by account and Meta error code.",
		}, []string{"account", "code"}),
		cooldowns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_account_cooldowns_total", Help: "Account cooldowns started.",
		}, []string{"account"}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wamux_queue_depth", Help: "Messages queued per account and priority.",
		}, []string{"account", "priority"}),
		tokens: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wamux_account_tokens", Help: "Tokens in the account's bucket.",
		}, []string{"account"}),
		utilization: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wamux_account_effective_rate_ratio", Help: "Effective (adaptive) rate divided by the configured rate.",
		}, []string{"account"}),
		seqWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wamux_seq_waiting", Help: "Messages waiting for a missing client_seq predecessor.",
		}, []string{"account"}),
		seqWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "wamux_seq_wait_seconds", Help: "Time a message waited in the reorder buffer before release.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		gapsSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_seq_gaps_skipped_total", Help: "client_seq values given up on after the gap timeout.",
		}, []string{"account"}),
		held: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_seq_held_total", Help: "Messages parked as held: their seq arrived after it was skipped.",
		}, []string{"account"}),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_messages_shed_total", Help: "P2 messages dropped under overload, by reason (age, depth).",
		}, []string{"account", "reason"}),
		acceptLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "wamux_submit_to_accept_seconds", Help: "Time from submission to the provider's acceptance, by priority.",
			Buckets: prometheus.ExponentialBuckets(0.002, 2, 16),
		}, []string{"priority"}),
		reroutes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_recipient_reroutes_total", Help: "Recipients assigned to an account, by reason (first, owner_unavailable).",
		}, []string{"reason"}),
	}
	for _, c := range []prometheus.Collector{m.submitted, m.duplicates, m.sends, m.retries, m.resends, m.throttled,
		m.cooldowns, m.queueDepth, m.tokens, m.utilization, m.seqWaiting, m.seqWait, m.gapsSkipped, m.held, m.shed,
		m.acceptLatency, m.reroutes} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register outbound metrics: %w", err)
		}
	}
	return m, nil
}
