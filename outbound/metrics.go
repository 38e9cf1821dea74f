package outbound

import (
	"context"
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux/provider/cloudapi"
)

// metrics of the outbound pipeline. Labels are bounded: account ids,
// priorities, fixed result and reason names; never phone numbers or msg_ids.
type metrics struct {
	submitted     *prometheus.CounterVec
	duplicates    prometheus.Counter
	sends         *prometheus.CounterVec
	paced         *prometheus.CounterVec
	retries       *prometheus.CounterVec
	resends       *prometheus.CounterVec
	throttled     *prometheus.CounterVec
	cooldowns     *prometheus.CounterVec
	queueDepth    *prometheus.GaugeVec
	seqWaiting    *prometheus.GaugeVec
	seqWait       prometheus.Histogram
	gapsSkipped   *prometheus.CounterVec
	held          *prometheus.CounterVec
	shed          *prometheus.CounterVec
	acceptLatency *prometheus.HistogramVec
	reroutes      *prometheus.CounterVec
	// unknownOutcomes and accountState feed the "unknown-outcome backlog"
	// and "account disabled" alerts in deploy/.
	unknownOutcomes *prometheus.GaugeVec
	accountState    *prometheus.GaugeVec
}

// throttleCodeLabel is the code label of wamux_provider_throttled_total:
// a code the classification lists keeps its number, -1 stays for an answer
// without a code, and any other code, which the provider (or a proxy on
// the way) chooses freely, is "other", so the series stay bounded.
func throttleCodeLabel(code int) string {
	if code == -1 || cloudapi.ListedCode(code) {
		return strconv.Itoa(code)
	}
	return "other"
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
		paced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_sends_paced_total", Help: "Accepted sends Meta answered held_for_quality_assessment (template pacing): their statuses come late, or never if Meta drops them.",
		}, []string{"account"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_send_retries_total", Help: "Messages put back for another attempt, by account and reason.",
		}, []string{"account", "reason"}),
		resends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_resends_total", Help: "Unknown-outcome messages after the quiet period: resent, or resolved by a status.",
		}, []string{"account", "outcome"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_provider_throttled_total", Help: "Provider rate-limit answers by account and Meta error code (a code the classification does not list: other).",
		}, []string{"account", "code"}),
		cooldowns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_account_cooldowns_total", Help: "Account cooldowns started.",
		}, []string{"account"}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wamux_queue_depth", Help: "Messages queued per account and priority.",
		}, []string{"account", "priority"}),
		seqWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wamux_seq_waiting", Help: "Messages waiting for a missing client_seq predecessor, or for their released sequencing step to be stored.",
		}, []string{"account"}),
		seqWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "wamux_seq_wait_seconds", Help: "Time a message waited in the reorder buffer before release.",
			// 1 ms to 74 h: a wait of the whole gap_timeout (5 min by
			// default, 24 h at most) lands in a finite bucket.
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 15),
		}),
		gapsSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_seq_gaps_skipped_total", Help: "client_seq values given up on after the gap timeout.",
		}, []string{"account"}),
		held: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_seq_held_total", Help: "Messages parked as held: their seq arrived after it was skipped.",
		}, []string{"account"}),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_messages_shed_total", Help: "Messages shed under overload: P2 dropped from the queue (age, depth), or refused at submit with 429 queue_full by the bound they hit (refused_depth, refused_backlog, refused_memory).",
		}, []string{"account", "reason"}),
		acceptLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "wamux_submit_to_accept_seconds", Help: "Time from submission to the provider's acceptance, by priority.",
			// 2 ms to 37 h: the time includes a seq wait (gap_timeout,
			// up to 24 h) and a P2 message's queueing up to p2_max_age.
			Buckets: prometheus.ExponentialBuckets(0.002, 2, 27),
		}, []string{"priority"}),
		reroutes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wamux_recipient_reroutes_total", Help: "Recipients assigned to an account, by reason (first, owner_unavailable, account_disabled, restored).",
		}, []string{"reason"}),
		unknownOutcomes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wamux_unknown_outcomes", Help: "Messages whose provider outcome is unknown, waiting for compensation, by account.",
		}, []string{"account"}),
		accountState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "wamux_account_state", Help: "1 for the account's current state (active, cooldown, disabled), 0 for the others.",
		}, []string{"account", "state"}),
	}
	for _, c := range []prometheus.Collector{m.submitted, m.duplicates, m.sends, m.paced, m.retries, m.resends, m.throttled,
		m.cooldowns, m.queueDepth, m.seqWaiting, m.seqWait, m.gapsSkipped, m.held, m.shed,
		m.acceptLatency, m.reroutes, m.unknownOutcomes, m.accountState} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register outbound metrics: %w", err)
		}
	}
	return m, nil
}

// forget removes an account's gauges: this node no longer works on it,
// and another node's show it now.
func (m *metrics) forget(account string) {
	l := prometheus.Labels{"account": account}
	m.queueDepth.DeletePartialMatch(l)
	m.seqWaiting.DeletePartialMatch(l)
	m.unknownOutcomes.DeletePartialMatch(l)
	m.accountState.DeletePartialMatch(l)
}

// limitCollector reports each account's bucket and adaptive rate when
// scraped: both change with time alone, so a gauge set by the worker loop
// would go stale while an account is idle.
type limitCollector struct {
	d             *Dispatcher
	tokens, ratio *prometheus.Desc
}

func newLimitCollector(d *Dispatcher) *limitCollector {
	return &limitCollector{
		d:      d,
		tokens: prometheus.NewDesc("wamux_account_tokens", "Tokens in the account's bucket.", []string{"account"}, nil),
		ratio: prometheus.NewDesc("wamux_account_effective_rate_ratio",
			"Effective (adaptive) rate divided by the configured rate.", []string{"account"}, nil),
	}
}

func (c *limitCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.tokens
	ch <- c.ratio
}

func (c *limitCollector) Collect(ch chan<- prometheus.Metric) {
	c.d.mu.Lock()
	ids := make([]string, 0, len(c.d.workers))
	for id := range c.d.workers {
		ids = append(ids, id)
	}
	c.d.mu.Unlock()
	for _, id := range ids {
		if tok, err := c.d.limiter.Tokens(context.Background(), id); err == nil {
			ch <- prometheus.MustNewConstMetric(c.tokens, prometheus.GaugeValue, tok, id)
		}
		if l := c.d.limiter.Limit(id); l.Rate > 0 {
			ch <- prometheus.MustNewConstMetric(c.ratio, prometheus.GaugeValue, l.EffectiveRate/l.Rate, id)
		}
	}
}
