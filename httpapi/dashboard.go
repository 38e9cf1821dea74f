package httpapi

import (
	"context"
	"embed"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/events"
)

// The dashboard is three static files compiled into the binary: no build
// step, no CDN, no font to fetch, so it works on a closed network and
// shows exactly the version that is running.
//
//go:embed ui
var uiFiles embed.FS

// uiPolicy keeps the page from loading anything that is not ours.
const uiPolicy = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'"

func uiFS() fs.FS {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embed pattern above guarantees the directory
	}
	return sub
}

// handleDashboard serves the page at "/". Like /metrics it needs no key
// and shows no secrets; the gateway binds to loopback by default.
func (s *Server) handleDashboard(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", uiPolicy)
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeFileFS(w, r, uiFS(), "index.html")
}

// handleUIAsset serves the page's script and style sheet.
func (s *Server) handleUIAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if _, err := fs.Stat(uiFS(), name); err != nil || name == "index.html" {
		writeError(w, r, wamux.Errorf(wamux.ENotFound, "no such file"))
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeFileFS(w, r, uiFS(), name)
}

// uiState is what the dashboard polls every second (GET /ui/state).
// Counters are cumulative: the page computes rates from the difference of
// two polls, so the server keeps no per-viewer state.
type uiState struct {
	Time          int64            `json:"time"` // unix milliseconds of this snapshot
	Accounts      []uiAccount      `json:"accounts"`
	Gateway       uiGateway        `json:"gateway"`
	Subscriptions []uiSubscription `json:"subscriptions"`
	Events        []uiEvent        `json:"events"` // newest first
}

// uiSubscription is an event subscription's delivery health: its
// endpoint's host only (a URL may carry a token in its query).
type uiSubscription struct {
	ID            string  `json:"id"`
	Host          string  `json:"host"`
	State         string  `json:"state"`
	StateReason   string  `json:"state_reason,omitempty"`
	Pending       float64 `json:"pending"`
	OldestPending float64 `json:"oldest_pending_seconds"`
	Delivered     float64 `json:"delivered"` // counter
	Retries       float64 `json:"retries"`   // counter
}

// uiEvent is a recent event without what identifies or quotes a customer
// (no phone number, no content): the dashboard needs no key.
type uiEvent struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Time      int64  `json:"time"` // unix milliseconds
	AccountID string `json:"account_id"`
	MsgID     string `json:"msg_id,omitempty"`
	Status    string `json:"status,omitempty"`
}

type uiAccount struct {
	ID            string         `json:"id"`
	State         string         `json:"state"`
	RatePerSec    float64        `json:"rate_per_sec"`
	Burst         int            `json:"burst"`
	Tokens        float64        `json:"tokens"`
	RateRatio     float64        `json:"effective_rate_ratio"` // adaptive rate / configured rate
	QueueDepth    map[string]int `json:"queue_depth"`
	CooldownUntil *time.Time     `json:"cooldown_until,omitempty"`
	Owner         string         `json:"owner,omitempty"` // in a cluster, the node holding it
	Accepted      float64        `json:"accepted"`        // counter: sends the provider accepted
	Attempts      float64        `json:"attempts"`        // counter: every send attempt
	Throttled     float64        `json:"throttled"`       // counter: provider 429s
	SeqWaiting    float64        `json:"seq_waiting"`
	GapsSkipped   float64        `json:"gaps_skipped"` // counter
	Unknown       float64        `json:"unknown_outcomes"`
}

type uiGateway struct {
	Submitted        map[string]float64 `json:"submitted"` // by priority
	Duplicates       float64            `json:"duplicates"`
	Retries          float64            `json:"retries"`
	Resends          map[string]float64 `json:"resends"`           // by outcome
	ReceiptsReceived map[string]float64 `json:"receipts_received"` // by source
	DedupHits        map[string]float64 `json:"dedup_hits"`        // by layer
	BloomFalsePos    float64            `json:"bloom_false_positives"`
	Late             float64            `json:"late_receipts"`
	DeadLetters      float64            `json:"dead_letters"`
	ReceiptLatency   uiHistogram        `json:"receipt_latency"`
	StreamLag        map[string]float64 `json:"stream_lag_seconds"` // by partition
	ReceiptsQueued   map[string]float64 `json:"receipts_queued"`    // by partition
}

// uiHistogram is a cumulative Prometheus histogram; the page takes the
// difference of two polls to get recent percentiles.
type uiHistogram struct {
	Count   uint64      `json:"count"`
	Sum     float64     `json:"sum"`
	Buckets [][]float64 `json:"buckets"` // [upper bound, cumulative count]; the +Inf bucket is Count
}

// handleUIState builds the snapshot from the same registry /metrics
// serves, plus the accounts list and the dispatcher's live view.
func (s *Server) handleUIState(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	accounts, err := s.store.ListAccounts(ctx)
	if err != nil {
		s.fail(w, r, "dashboard state", err)
		return
	}
	families, err := s.registry.Gather()
	if err != nil {
		// Gather returns what it could alongside an inconsistency; a
		// partial dashboard beats none.
		s.logger(r).Warn("dashboard: gather metrics", "err", err)
	}
	m := indexFamilies(families)
	st := uiState{Time: time.Now().UnixMilli(), Accounts: make([]uiAccount, 0, len(accounts))}
	accepted := m.sumBy("wamux_sends_total", "account", labelIs("result", "accepted"))
	attempts := m.sumBy("wamux_sends_total", "account", nil)
	throttled := m.sumBy("wamux_provider_throttled_total", "account", nil)
	ratio := m.sumBy("wamux_account_effective_rate_ratio", "account", nil)
	waiting := m.sumBy("wamux_seq_waiting", "account", nil)
	gaps := m.sumBy("wamux_seq_gaps_skipped_total", "account", nil)
	unknown := m.sumBy("wamux_unknown_outcomes", "account", nil)
	leases := s.leases(ctx)
	for _, a := range accounts {
		v := s.accountView(a, leases)
		r, ok := ratio[a.ID]
		if !ok {
			r = 1
		}
		owner := ""
		if v.Owner != nil {
			owner = v.Owner.Node
		}
		st.Accounts = append(st.Accounts, uiAccount{
			ID: v.ID, State: v.State, Owner: owner, RatePerSec: v.RatePerSec, Burst: v.Burst, Tokens: v.Tokens, RateRatio: r,
			QueueDepth: v.QueueDepth, CooldownUntil: v.CooldownUntil,
			Accepted: accepted[a.ID], Attempts: attempts[a.ID], Throttled: throttled[a.ID],
			SeqWaiting: waiting[a.ID], GapsSkipped: gaps[a.ID], Unknown: unknown[a.ID],
		})
	}
	sort.Slice(st.Accounts, func(i, j int) bool { return st.Accounts[i].ID < st.Accounts[j].ID })
	st.Gateway = uiGateway{
		Submitted:        m.sumBy("wamux_messages_submitted_total", "priority", nil),
		Duplicates:       m.total("wamux_messages_duplicate_total"),
		Retries:          m.total("wamux_send_retries_total"),
		Resends:          m.sumBy("wamux_resends_total", "outcome", nil),
		ReceiptsReceived: m.sumBy("wamux_receipts_received_total", "source", nil),
		DedupHits:        m.sumBy("wamux_receipts_dedup_hits_total", "layer", nil),
		BloomFalsePos:    m.total("wamux_receipts_bloom_false_positives_total"),
		Late:             m.total("wamux_receipts_late_total"),
		DeadLetters:      m.total("wamux_dead_letters_total"),
		ReceiptLatency:   m.histogram("wamux_receipt_latency_seconds"),
		StreamLag:        m.sumBy("wamux_receipts_partition_lag_seconds", "partition", nil),
		ReceiptsQueued:   m.sumBy("wamux_receipts_partition_queued", "partition", nil),
	}
	st.Subscriptions, st.Events = s.uiEvents(ctx, m)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, st)
}

// uiEvents is the event part of the dashboard: subscriptions with their
// delivery health, and the latest events.
func (s *Server) uiEvents(ctx context.Context, m families) ([]uiSubscription, []uiEvent) {
	subs, evs := []uiSubscription{}, []uiEvent{}
	if s.events == nil {
		return subs, evs
	}
	list, err := s.events.List(ctx)
	if err != nil {
		s.log.Warn("dashboard: list subscriptions", "err", err)
	}
	pending := m.sumBy("wamux_event_deliveries_pending", "subscription", nil)
	oldest := m.sumBy("wamux_event_oldest_pending_seconds", "subscription", nil)
	delivered := m.sumBy("wamux_event_deliveries_delivered_total", "subscription", nil)
	retries := m.sumBy("wamux_event_delivery_attempts_total", "subscription", labelIs("result", "retry"))
	for _, sub := range list {
		host := ""
		if u, err := url.Parse(sub.URL); err == nil {
			host = u.Host
		}
		subs = append(subs, uiSubscription{ID: sub.ID, Host: host, State: string(sub.State), StateReason: sub.StateReason,
			Pending: pending[sub.ID], OldestPending: oldest[sub.ID], Delivered: delivered[sub.ID], Retries: retries[sub.ID]})
	}
	for _, e := range s.events.Recent() {
		evs = append(evs, uiEvent{ID: events.WebhookID(e), Type: string(e.Type), Time: e.CreatedAt.UnixMilli(),
			AccountID: e.AccountID, MsgID: e.MsgID, Status: e.Status})
	}
	return subs, evs
}

// families indexes gathered metric families by name.
type families map[string]*dto.MetricFamily

func indexFamilies(fs []*dto.MetricFamily) families {
	m := make(families, len(fs))
	for _, f := range fs {
		m[f.GetName()] = f
	}
	return m
}

func labelIs(name, value string) func(*dto.Metric) bool {
	return func(m *dto.Metric) bool { return labelValue(m, name) == value }
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// sumBy adds up the series of one metric by the value of one label,
// keeping only the series keep accepts (all when nil). The map is never
// nil, so the JSON always has an object.
func (f families) sumBy(name, label string, keep func(*dto.Metric) bool) map[string]float64 {
	out := map[string]float64{}
	fam, ok := f[name]
	if !ok {
		return out
	}
	for _, m := range fam.GetMetric() {
		if keep != nil && !keep(m) {
			continue
		}
		out[labelValue(m, label)] += value(m)
	}
	return out
}

func (f families) total(name string) float64 {
	var sum float64
	for _, v := range f.sumBy(name, "", nil) {
		sum += v
	}
	return sum
}

// histogram merges every series of a histogram into one.
func (f families) histogram(name string) uiHistogram {
	h := uiHistogram{Buckets: [][]float64{}}
	fam, ok := f[name]
	if !ok {
		return h
	}
	byBound := map[float64]uint64{}
	for _, m := range fam.GetMetric() {
		hm := m.GetHistogram()
		if hm == nil {
			continue
		}
		h.Count += hm.GetSampleCount()
		h.Sum += hm.GetSampleSum()
		for _, b := range hm.GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) {
				byBound[b.GetUpperBound()] += b.GetCumulativeCount()
			}
		}
	}
	bounds := make([]float64, 0, len(byBound))
	for b := range byBound {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	for _, b := range bounds {
		h.Buckets = append(h.Buckets, []float64{b, float64(byBound[b])})
	}
	return h
}
