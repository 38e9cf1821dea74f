package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux/sim"
)

// OutboundConfig is one outbound measurement: Accounts accounts, each
// allowed Rate messages/s by Meta and configured the same in wamux, fed
// Rate×Duration messages with shuffled client_seq.
type OutboundConfig struct {
	Accounts int
	Rate     float64
	Duration time.Duration
	Faults   sim.Faults
	// Load, when above 0, paces submission at Load × Rate per account for
	// the duration (1: each account offered exactly its rate, the case
	// utilization is judged on; above 1: sustained overload; 0.5: latency
	// below capacity); 0 submits everything at once, a flood whose
	// ingestion competes with sending for the store's one writer.
	Load  float64
	Seed  uint64
	Store string
	// Burst is the accounts' burst; 0 creates them without one, with
	// the API's default.
	Burst int
	// StrictSecond makes the simulator refuse a message that would make
	// more than Rate in any one second (sim.Limits.StrictSecond).
	StrictSecond bool
	// Progress, when set, is called about once a second while waiting.
	Progress func(accepted, total int64)
}

// Latency percentiles in milliseconds.
type Latency struct {
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	N   int     `json:"n"`
}

// OutboundReport is what `wamux bench outbound --json` prints; every count
// comes from the simulator's ground truth unless named otherwise.
type OutboundReport struct {
	Accounts             int                `json:"accounts"`
	Load                 float64            `json:"load,omitempty"`
	RatePerAccount       float64            `json:"rate_per_account"`
	Burst                int                `json:"burst"`
	StrictSecond         bool               `json:"strict_second"`
	DurationSec          float64            `json:"duration_sec"`
	Submitted            int                `json:"submitted"`
	Accepted             int64              `json:"accepted"`
	ElapsedSec           float64            `json:"elapsed_sec"`
	Utilization          float64            `json:"utilization"`
	Provider429          int64              `json:"provider_429"`
	Rate429              float64            `json:"rate_429"`
	AvgAttempts          float64            `json:"avg_attempts"`
	DuplicatesAtProvider int64              `json:"duplicates_at_provider"`
	OrderViolations      int                `json:"order_violations"`
	OverLimit            int64              `json:"over_limit"`
	Retries              float64            `json:"retries"`
	Resends              float64            `json:"resends"`
	NotAccepted          int                `json:"not_accepted"`
	Latency              map[string]Latency `json:"latency_submit_to_accepted"`
}

// paceTick is how often a paced run submits.
const paceTick = 50 * time.Millisecond

type sentMsg struct {
	account  string
	pnid     string
	to       string
	seq      int64
	priority string
	at       time.Time
}

// outboundReq is one message of the workload: its request body and what
// the report needs to know of it.
type outboundReq struct {
	body map[string]any
	meta sentMsg
}

// RunOutbound runs one outbound measurement.
func RunOutbound(ctx context.Context, cfg OutboundConfig) (OutboundReport, error) {
	if cfg.Accounts <= 0 || cfg.Rate <= 0 || cfg.Duration <= 0 {
		return OutboundReport{}, fmt.Errorf("accounts, rate and duration must be positive")
	}
	h, err := Start(ctx, HarnessConfig{
		Store: cfg.Store,
		// Room for the simulator's latency and jitter above the default:
		// a timeout is an unknown outcome, resent after the quiet period.
		ClientTimeout: 2*time.Second + cfg.Faults.Latency.Max + cfg.Faults.Jitter,
		Sim:           sim.Config{Seed: cfg.Seed, Faults: cfg.Faults, Webhooks: sim.Webhooks{BatchSize: 100, Concurrency: 16, Delay: sim.Range{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond}}},
		// The production quiet period (30 s): when the machine is
		// overloaded, the simulator's webhook POSTs time out and are
		// redelivered with backoff, as Meta's are, and a shorter quiet
		// period would resend messages whose status is merely late.
		Settings: map[string]any{"backoff_base": "100ms", "backoff_cap": "2s"},
	})
	if err != nil {
		return OutboundReport{}, err
	}
	defer h.Close()

	rng := rand.New(rand.NewPCG(cfg.Seed, 7))
	burst := 0
	for a := 0; a < cfg.Accounts; a++ {
		id, pnid := outboundAccount(a)
		if err := h.AddAccount(ctx, id, pnid, cfg.Rate, cfg.Burst, sim.Limits{Rate: cfg.Rate, StrictSecond: cfg.StrictSecond}); err != nil {
			return OutboundReport{}, err
		}
		var acct struct {
			Burst int `json:"burst"`
		}
		if err := h.Do(ctx, "GET", "/v1/accounts/"+id, nil, &acct); err != nil {
			return OutboundReport{}, err
		}
		burst = acct.Burst
	}
	all := outboundWorkload(cfg, rng)

	start := time.Now()
	sub := newOutboundSubmitter(h, len(all))
	if cfg.Load <= 0 {
		sub.flood(ctx, all)
	} else if err := sub.paced(ctx, cfg, all, start); err != nil {
		return OutboundReport{}, err
	}
	if err := sub.wait(); err != nil {
		return OutboundReport{}, err
	}
	if err := waitOutboundAccepted(ctx, cfg, h, int64(len(sub.sent)), start); err != nil {
		return OutboundReport{}, err
	}
	return outboundReport(cfg, h, sub.sent, start, burst), nil
}

// outboundAccount is account a's id and phone number id.
func outboundAccount(a int) (id, pnid string) {
	return fmt.Sprintf("acct-%03d", a), fmt.Sprintf("%d", 100000000000+a)
}

// outboundWorkload is every message the clients submit: per account,
// client_seq 1 to Rate×Duration (×Load when paced), shuffled within
// windows, the accounts interleaved as many clients would.
func outboundWorkload(cfg OutboundConfig, rng *rand.Rand) []outboundReq {
	perAccount := int(math.Ceil(cfg.Rate * cfg.Duration.Seconds()))
	if cfg.Load > 0 {
		perAccount = int(math.Ceil(cfg.Rate * cfg.Load * cfg.Duration.Seconds()))
	}
	recipients := max(50, perAccount/2) // ≤ 2 messages per recipient: pair limits stay out of the way
	perAcc := make([][]outboundReq, cfg.Accounts)
	for a := 0; a < cfg.Accounts; a++ {
		id, pnid := outboundAccount(a)
		seqs := make([]outboundReq, perAccount)
		for i := range seqs {
			seq := int64(i + 1)
			to := fmt.Sprintf("1%03d%07d", a, i%recipients)
			p := "P1"
			switch r := rng.IntN(10); {
			case r == 0:
				p = "P0"
			case r >= 7:
				p = "P2"
			}
			seqs[i] = outboundReq{
				body: map[string]any{"biz_type": "bench", "account_id": id, "client_seq": seq, "to": to, "priority": p,
					"type": "text", "text": map[string]any{"body": fmt.Sprintf("message %d", seq)}},
				meta: sentMsg{account: id, pnid: pnid, to: to, seq: seq, priority: p},
			}
		}
		// Shuffle within windows so the reorder buffer has work: of 50 when
		// everything is submitted at once, of what one paced round submits
		// otherwise (a wider window would add waiting to the latency).
		window := 50
		if cfg.Load > 0 {
			window = max(1, int(cfg.Rate*cfg.Load*paceTick.Seconds()))
		}
		for w := 0; w < len(seqs); w += window {
			win := seqs[w:min(w+window, len(seqs))]
			rng.Shuffle(len(win), func(i, j int) { win[i], win[j] = win[j], win[i] })
		}
		perAcc[a] = seqs
	}
	var all []outboundReq
	for i := 0; i < perAccount; i++ {
		for a := range perAcc {
			all = append(all, perAcc[a][i])
		}
	}
	return all
}

// outboundBatch is how many messages one submission carries.
const outboundBatch = 500

// outboundSubmitter submits batches, at most four at a time, and records
// when each accepted message was submitted.
type outboundSubmitter struct {
	h    *Harness
	mu   sync.Mutex
	sent map[string]sentMsg // by msg_id; under mu until wait returns
	wg   sync.WaitGroup
	errs chan error // the first failed submission
	sem  chan struct{}
}

func newOutboundSubmitter(h *Harness, n int) *outboundSubmitter {
	return &outboundSubmitter{h: h, sent: make(map[string]sentMsg, n), errs: make(chan error, 1), sem: make(chan struct{}, 4)}
}

// submit posts chunk as one batch on a goroutine of its own, once fewer
// than four are in flight.
func (s *outboundSubmitter) submit(ctx context.Context, chunk []outboundReq) {
	s.wg.Add(1)
	s.sem <- struct{}{}
	go func() {
		defer s.wg.Done()
		defer func() { <-s.sem }()
		msgs := make([]map[string]any, len(chunk))
		for k, r := range chunk {
			msgs[k] = r.body
		}
		at := time.Now()
		var out struct {
			Results []struct {
				MsgID string         `json:"msg_id"`
				Error map[string]any `json:"error"`
			} `json:"results"`
		}
		if err := s.h.Do(ctx, "POST", "/v1/messages:batch", map[string]any{"messages": msgs}, &out); err != nil {
			select {
			case s.errs <- err:
			default:
			}
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for k, r := range out.Results {
			if r.Error != nil {
				continue
			}
			m := chunk[k].meta
			m.at = at
			s.sent[r.MsgID] = m
		}
	}()
}

// flood submits everything at once.
func (s *outboundSubmitter) flood(ctx context.Context, all []outboundReq) {
	for i := 0; i < len(all); i += outboundBatch {
		s.submit(ctx, all[i:min(i+outboundBatch, len(all))])
	}
}

// paced submits at Load × Rate per account: each round submits what the
// offered rate owes since the last one, so a slow round is made up, not
// lost.
func (s *outboundSubmitter) paced(ctx context.Context, cfg OutboundConfig, all []outboundReq, start time.Time) error {
	tick := time.NewTicker(paceTick)
	defer tick.Stop()
	owed, next, last := 0.0, 0, start
	for next < len(all) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-tick.C:
			owed += float64(cfg.Accounts) * cfg.Rate * cfg.Load * now.Sub(last).Seconds()
			last = now
		}
		n := min(int(owed), len(all)-next)
		owed -= float64(n)
		for i := next; i < next+n; i += outboundBatch {
			s.submit(ctx, all[i:min(i+outboundBatch, next+n)])
		}
		next += n
	}
	return nil
}

// wait waits for every submission and returns the first failure.
func (s *outboundSubmitter) wait() error {
	s.wg.Wait()
	select {
	case err := <-s.errs:
		return fmt.Errorf("submit: %w", err)
	default:
		return nil
	}
}

// waitOutboundAccepted waits until the simulator has accepted total
// distinct messages, or until the deadline leaves room for unknown
// outcomes (a quiet period, its extension and a resend), reporting
// progress about once a second.
func waitOutboundAccepted(ctx context.Context, cfg OutboundConfig, h *Harness, total int64, start time.Time) error {
	deadline := start.Add(3*cfg.Duration + 150*time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	lastProgress := time.Now()
	for {
		acc := h.Sim.Stats().Totals.Accepted - h.Sim.Stats().Totals.Duplicates
		if cfg.Progress != nil && time.Since(lastProgress) >= time.Second {
			cfg.Progress(acc, total)
			lastProgress = time.Now()
		}
		if acc >= total || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func outboundReport(cfg OutboundConfig, h *Harness, sent map[string]sentMsg, start time.Time, burst int) OutboundReport {
	st := h.Sim.Stats()
	rep := OutboundReport{
		Accounts: cfg.Accounts, Load: cfg.Load, RatePerAccount: cfg.Rate, Burst: burst, StrictSecond: cfg.StrictSecond,
		DurationSec: cfg.Duration.Seconds(),
		Submitted:   len(sent), Accepted: st.Totals.Accepted, OverLimit: st.Totals.OverLimit,
		Provider429: st.Totals.Rejected[130429], DuplicatesAtProvider: st.Totals.Duplicates,
		Latency: map[string]Latency{},
	}
	if st.Totals.Requests > 0 {
		rep.Rate429 = float64(rep.Provider429) / float64(st.Totals.Requests)
	}
	if st.Totals.Accepted > 0 {
		rep.AvgAttempts = float64(st.Totals.Requests) / float64(st.Totals.Accepted-st.Totals.Duplicates)
	}
	lat := map[string][]float64{}
	firstAccept := map[string]bool{}
	var last time.Time
	for a := 0; a < cfg.Accounts; a++ {
		pnid := fmt.Sprintf("%d", 100000000000+a)
		lastSeq := map[string]int64{}
		for _, m := range h.Sim.Messages(pnid, "") {
			s, ok := sent[m.CallbackData]
			if !ok || firstAccept[m.CallbackData] {
				continue
			}
			firstAccept[m.CallbackData] = true
			if m.AcceptedAt.After(last) {
				last = m.AcceptedAt
			}
			if s.seq <= lastSeq[s.to] {
				rep.OrderViolations++
			}
			lastSeq[s.to] = max(lastSeq[s.to], s.seq)
			lat[s.priority] = append(lat[s.priority], float64(m.AcceptedAt.Sub(s.at).Microseconds())/1000)
		}
	}
	rep.NotAccepted = len(sent) - len(firstAccept)
	elapsed := last.Sub(start)
	rep.ElapsedSec = elapsed.Seconds()
	if allowed := float64(cfg.Accounts) * (cfg.Rate*elapsed.Seconds() + float64(burst)); allowed > 0 {
		rep.Utilization = float64(len(firstAccept)) / allowed
	}
	for p, xs := range lat {
		slices.Sort(xs)
		rep.Latency[p] = Latency{P50: percentile(xs, 0.50), P99: percentile(xs, 0.99), N: len(xs)}
	}
	rep.Retries = sumMetric(h.Registry(), "wamux_send_retries_total", "", "")
	rep.Resends = sumMetric(h.Registry(), "wamux_resends_total", "outcome", "resent")
	return rep
}

func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// sumMetric adds up a counter's series, optionally only those with one
// label value.
func sumMetric(reg *prometheus.Registry, name, label, value string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" {
				match := false
				for _, l := range m.GetLabel() {
					if l.GetName() == label && l.GetValue() == value {
						match = true
					}
				}
				if !match {
					continue
				}
			}
			if c := m.GetCounter(); c != nil {
				total += c.GetValue()
			}
		}
	}
	return total
}
