package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
)

// DemoConfig configures `wamux demo`.
type DemoConfig struct {
	Listen  string
	DataDir string
	Seed    uint64
	// Started is called once the gateway answers, with its URL and key.
	Started func(url, apiKey string)
	// Stopping is called when the traffic stops, before the check of the
	// events, which waits for delivery to settle (3 min at most).
	Stopping func()
}

// DemoSummary is what `wamux demo --json` prints when it ends, taken from
// the simulator's ground truth (retries and resends from the gateway's
// metrics).
type DemoSummary struct {
	Submitted            int64   `json:"submitted"`
	Accepted             int64   `json:"accepted"`
	DuplicatesAtProvider int64   `json:"duplicates_at_provider"`
	OrderViolations      int     `json:"order_violations"`
	OverLimit            int64   `json:"over_limit"`
	Provider429          int64   `json:"provider_429"`
	Retries              float64 `json:"retries"`
	Resends              float64 `json:"resends"`
	RejectedSubmissions  int64   `json:"rejected_submissions"`
	// Events is what the demo's subscriber to every event received.
	Events DemoEvents `json:"events"`
}

type demoAccount struct {
	id, pnid string
	rate     float64 // what wamux is told
	metaRate float64 // what the simulator enforces
	offered  float64 // messages per second the demo's clients submit
}

// demoAccounts are the demo's accounts: different rates, and one offered
// more than its rate.
func demoAccounts() []demoAccount {
	return []demoAccount{
		{"shop-eu", "100200300401", 40, 40, 36},
		{"shop-us", "100200300402", 20, 20, 18},
		{"support", "100200300403", 10, 10, 9},
		// Clients want 17/s from an account allowed 15/s: wamux's own
		// bucket throttles it (its queue grows) so Meta never sees more
		// than its limit; "Meta" also answers 130429 now and then on its
		// own (as it does when a WABA-wide limit trips), which the
		// adaptive limiter answers by backing off.
		{"promo-overdriven", "100200300404", 15, 15, 20},
	}
}

// promoPNID is the phone number id of the overdriven account, the one
// whose faults and operator events differ.
const promoPNID = "100200300404"

// demoFaults are the faults every number of the simulator injects.
func demoFaults() sim.Faults {
	return sim.Faults{ServerError: 0.01, Reset: 0.005, SlowAccept: 0.003, SlowDelay: 3 * time.Second,
		WebhookDuplicate: 0.1, WebhookReorder: 0.1}
}

// RunDemo runs gateway, simulator and traffic until ctx ends. Accounts have
// different rates; one is offered more than its rate, so wamux throttles it
// and its queue grows, and "Meta" answers it 130429 now and then, so the
// adaptive limiter shows, and it sends marketing templates that "Meta"
// paces now and then; the simulator injects 5xx, resets, slow answers,
// duplicated and reordered webhooks. wamux itself never goes over a limit:
// the summary's over_limit stays 0.
func RunDemo(ctx context.Context, cfg DemoConfig) (DemoSummary, error) {
	h, err := startDemo(cfg.Listen, cfg.DataDir, cfg.Seed)
	if err != nil {
		return DemoSummary{}, err
	}
	defer h.Close()
	recv, err := startEventReceiver()
	if err != nil {
		return DemoSummary{}, err
	}
	defer recv.Close()
	accounts := demoAccounts()
	if err := setupDemoAccounts(ctx, h, accounts); err != nil {
		return DemoSummary{}, err
	}
	subID, err := demoSubscription(ctx, h, recv)
	if err != nil {
		return DemoSummary{}, err
	}
	if err := seedExpired(ctx, h); err != nil {
		return DemoSummary{}, err
	}
	if cfg.Started != nil {
		cfg.Started(h.URL, h.APIKey)
	}
	tr := newDemoTraffic(accounts, cfg.Seed)
	if err := tr.run(ctx, h); err != nil {
		return DemoSummary{}, err
	}
	if cfg.Stopping != nil {
		cfg.Stopping()
	}
	// The traffic has stopped; what is under way settles, and every
	// message submitted or accepted by "Meta" is checked against the
	// events received.
	sum := tr.summary(h)
	sum.Events = checkDemoEvents(context.WithoutCancel(ctx), h, subID, recv, tr.checkIDs(h))
	return sum, nil
}

// startDemo starts the gateway and the simulator with the demo's faults
// and settings.
func startDemo(listen, dataDir string, seed uint64) (*Harness, error) {
	return Start(context.Background(), HarnessConfig{
		Listen: listen, DataDir: dataDir,
		Sim: sim.Config{Seed: seed,
			Faults: demoFaults(),
			Webhooks: sim.Webhooks{ReadProbability: 0.6, FailProbability: 0.02, BatchSize: 10,
				Delay: sim.Range{Min: 50 * time.Millisecond, Max: 800 * time.Millisecond}},
			// Customers write to every number on their own: message.inbound
			// events beside the statuses.
			Inbound: sim.InboundTraffic{Rate: 0.5, Customers: 50},
		},
		// A short late window and a small P2 bound let the late-receipt
		// audit and P2 shedding show within a minute; a small Bloom filter
		// makes false positives (each confirmed against the store) show.
		Settings: map[string]any{"quiet_period": "5s", "gap_timeout": "20s", "backoff_base": "200ms", "backoff_cap": "5s",
			"cooldown_min": "5s", "cooldown_max": "20s", "late_window": "1s", "p2_max_depth": 60},
		Bloom: receipts.BloomConfig{ExpectedPerHour: 2000},
		// The demo's event receiver listens on loopback.
		EventAllowNetworks: "127.0.0.0/8",
		// Retention runs every few seconds, so the message seedExpired
		// stores is deleted within the first minute.
		InboundPruneEvery: 5 * time.Second,
	})
}

// seedExpired stores an inbound message received a month ago, past the
// inbound retention, as a gateway that has run that long holds: retention
// deletes it, so its counter moves too.
func seedExpired(ctx context.Context, h *Harness) error {
	at := time.Now().Add(-31 * 24 * time.Hour)
	_, err := h.App.Store().AddInboundMessages(ctx, []store.InboundMessage{{AccountID: "promo-overdriven",
		WAMID: "wamid.demo-expired", Type: "text", From: "4915112345678", SentAt: at, ReceivedAt: at}})
	if err != nil {
		return fmt.Errorf("seed an expired inbound message: %w", err)
	}
	return nil
}

// setupDemoAccounts creates the accounts in the gateway and the simulator,
// and gives the overdriven one its own faults.
func setupDemoAccounts(ctx context.Context, h *Harness, accounts []demoAccount) error {
	for _, a := range accounts {
		if err := h.AddAccount(ctx, a.id, a.pnid, a.rate, max(1, int(a.rate/10)), sim.Limits{Rate: a.metaRate}); err != nil {
			return err
		}
	}
	promo := demoFaults()
	// 5 % of its sends: often enough that three throttles, each within
	// the limiter's 3 s of the last, start a cooldown in the first
	// minute, as an account Meta keeps throttling would.
	promo.Codes = map[int]float64{130429: 0.05}
	// Meta paces some marketing templates (held_for_quality_assessment):
	// their statuses come late, or never for a dropped one.
	promo.Paced, promo.PacedHold, promo.PacedDrop = 0.3, 10*time.Second, 0.2
	return h.Sim.SetFaults(promoPNID, promo)
}

// withheld is a message a client holds back, and when it sends it after
// all.
type withheld struct {
	msg map[string]any
	due time.Time
}

// demoTraffic is the demo's clients: what they offer each tick, and what
// the gateway answered.
type demoTraffic struct {
	accounts []demoAccount
	rng      *rand.Rand
	next     []int64   // last client_seq per account
	owed     []float64 // fractional messages carried to the next tick
	// lost holds messages back: about once a minute one seq of "support",
	// so the account's later seqs wait until gap_timeout skips it (seq
	// waiting, gaps skipped); 30 s later the client sends it after all and
	// it is parked as held, never sent out of order.
	lost   []withheld
	events *operatorEvents

	seqOf               map[string]int64  // by msg_id, of messages with a client_seq
	toOf                map[string]string // by msg_id, likewise
	ids                 []string          // msg_id of every message submitted
	submitted, rejected int64
}

func newDemoTraffic(accounts []demoAccount, seed uint64) *demoTraffic {
	return &demoTraffic{
		accounts: accounts,
		rng:      rand.New(rand.NewPCG(seed, 11)),
		next:     make([]int64, len(accounts)),
		owed:     make([]float64, len(accounts)),
		events:   newOperatorEvents(promoPNID),
		seqOf:    map[string]int64{},
		toOf:     map[string]string{},
	}
}

// run submits a batch every 200 ms until ctx ends.
func (tr *demoTraffic) run(ctx context.Context, h *Harness) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if body, ok := tr.events.next(time.Now()); ok {
			if err := h.PostWebhook(ctx, body); err != nil && ctx.Err() == nil {
				return err
			}
			// A forged copy is refused, and counted as such.
			if err := h.PostForgedWebhook(ctx, body); err != nil && ctx.Err() == nil {
				return err
			}
		}
		// Owe messages for the time that really passed: a slow round (a
		// loaded machine, the race detector) makes the next batch larger
		// instead of lowering the offered rate.
		now := time.Now()
		elapsed := min(now.Sub(last).Seconds(), 2)
		last = now
		batch := tr.batch(now, elapsed)
		results, err := submitDemoBatch(ctx, h, batch)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		tr.record(batch, results)
	}
}

// batch is what the clients submit at now, elapsed seconds after the last
// batch: each account's messages, shuffled, with client retries; the
// withheld messages now due; and two messages without an account.
func (tr *demoTraffic) batch(now time.Time, elapsed float64) []map[string]any {
	var batch []map[string]any
	for i := range tr.accounts {
		window := tr.window(i, now, elapsed)
		tr.rng.Shuffle(len(window), func(x, y int) { window[x], window[y] = window[y], window[x] })
		batch = append(batch, window...)
		// Client retries: repeat about one message in ten (at least one
		// per non-empty window); they must come back as duplicates.
		for k := 0; k < (len(window)+9)/10; k++ {
			batch = append(batch, window[tr.rng.IntN(len(window))])
		}
	}
	for len(tr.lost) > 0 && !now.Before(tr.lost[0].due) {
		batch = append(batch, tr.lost[0].msg)
		tr.lost = tr.lost[1:]
	}
	// Messages without an account: routed to the pool, sticky per customer.
	for k := 0; k < 2; k++ {
		batch = append(batch, map[string]any{"biz_type": "notice", "to": fmt.Sprintf("44700%06d", tr.rng.IntN(200)),
			"type": "text", "text": map[string]any{"body": "your appointment is tomorrow"}})
	}
	return batch
}

// window is the messages account i offers for elapsed seconds, in seq
// order, less the one it holds back now and then.
func (tr *demoTraffic) window(i int, now time.Time, elapsed float64) []map[string]any {
	a := tr.accounts[i]
	tr.owed[i] += a.offered * elapsed
	n := int(tr.owed[i])
	tr.owed[i] -= float64(n)
	window := make([]map[string]any, 0, n)
	for k := 0; k < n; k++ {
		tr.next[i]++
		seq := tr.next[i]
		to := fmt.Sprintf("49%03d%06d", i, tr.rng.IntN(500))
		p := []string{"P0", "P1", "P1", "P1", "P2"}[tr.rng.IntN(5)]
		msg := map[string]any{"biz_type": "demo", "account_id": a.id, "client_seq": seq, "to": to,
			"priority": p, "type": "text", "text": map[string]any{"body": fmt.Sprintf("order %d update", seq)}}
		if a.id == "promo-overdriven" && seq%10 == 0 {
			// A marketing template now and then, which "Meta" paces.
			delete(msg, "text")
			msg["type"], msg["template"] = "template", map[string]any{"name": "spring_sale",
				"language": map[string]any{"code": "en_US"}}
		}
		if a.id == "support" && seq%600 == 50 {
			tr.lost = append(tr.lost, withheld{msg, now.Add(30 * time.Second)})
			continue
		}
		window = append(window, msg)
	}
	return window
}

// demoResult is the gateway's answer to one message of a batch.
type demoResult struct {
	MsgID     string         `json:"msg_id"`
	Duplicate bool           `json:"duplicate"`
	Error     map[string]any `json:"error"`
}

func submitDemoBatch(ctx context.Context, h *Harness, batch []map[string]any) ([]demoResult, error) {
	var out struct {
		Results []demoResult `json:"results"`
	}
	err := h.Do(ctx, "POST", "/v1/messages:batch", map[string]any{"messages": batch}, &out)
	return out.Results, err
}

// record counts the batch's results and remembers the seq and recipient
// of each new message that carries a client_seq.
func (tr *demoTraffic) record(batch []map[string]any, results []demoResult) {
	for k, r := range results {
		switch {
		case r.Error != nil:
			tr.rejected++
		case !r.Duplicate:
			tr.submitted++
			tr.ids = append(tr.ids, r.MsgID)
			if seq, ok := batch[k]["client_seq"].(int64); ok {
				tr.seqOf[r.MsgID] = seq
				tr.toOf[r.MsgID] = batch[k]["to"].(string)
			}
		}
	}
}

// summary reads the simulator's ground truth and the gateway's metrics,
// and counts, per account and recipient, messages that reached the
// provider below a seq it had already seen.
func (tr *demoTraffic) summary(h *Harness) DemoSummary {
	st := h.Sim.Stats()
	sum := DemoSummary{
		Submitted: tr.submitted, Accepted: st.Totals.Accepted, DuplicatesAtProvider: st.Totals.Duplicates,
		OverLimit: st.Totals.OverLimit, Provider429: st.Totals.Rejected[130429],
		Retries:             sumMetric(h.Registry(), "wamux_send_retries_total", "", ""),
		Resends:             sumMetric(h.Registry(), "wamux_resends_total", "outcome", "resent"),
		RejectedSubmissions: tr.rejected,
	}
	for _, a := range tr.accounts {
		last := map[string]int64{}
		seen := map[string]bool{}
		for _, m := range h.Sim.Messages(a.pnid, "") {
			seq, ok := tr.seqOf[m.CallbackData]
			if !ok || seen[m.CallbackData] {
				continue
			}
			seen[m.CallbackData] = true
			to := tr.toOf[m.CallbackData]
			if seq <= last[to] {
				sum.OrderViolations++
			}
			last[to] = max(last[to], seq)
		}
	}
	return sum
}

// checkIDs are the messages whose events the demo checks: every one it
// submitted, and any other the simulator accepted (its callback data is
// the msg_id).
func (tr *demoTraffic) checkIDs(h *Harness) []string {
	ids := slices.Clone(tr.ids)
	known := make(map[string]bool, len(ids))
	for _, id := range ids {
		known[id] = true
	}
	for _, m := range h.Sim.Messages("", "") {
		if m.CallbackData != "" && !known[m.CallbackData] {
			known[m.CallbackData] = true
			ids = append(ids, m.CallbackData)
		}
	}
	return ids
}
