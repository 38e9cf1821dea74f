package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/sim"
)

// DemoConfig configures `wamux demo`.
type DemoConfig struct {
	Listen  string
	DataDir string
	Seed    uint64
	// Started is called once the gateway answers, with its URL and key.
	Started func(url, apiKey string)
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
}

type demoAccount struct {
	id, pnid string
	rate     float64 // what wamux is told
	metaRate float64 // what the simulator enforces
	offered  float64 // messages per second the demo's clients submit
}

// RunDemo runs gateway, simulator and traffic until ctx ends. Accounts have
// different rates; one is offered more than its rate, so wamux throttles it
// and its queue grows, and "Meta" answers it 130429 now and then, so the
// adaptive limiter shows, and it sends marketing templates that "Meta"
// paces now and then; the simulator injects 5xx, resets, slow answers,
// duplicated and reordered webhooks. wamux itself never goes over a limit:
// the summary's over_limit stays 0.
func RunDemo(ctx context.Context, cfg DemoConfig) (DemoSummary, error) {
	faults := sim.Faults{ServerError: 0.01, Reset: 0.005, SlowAccept: 0.003, SlowDelay: 3 * time.Second,
		WebhookDuplicate: 0.1, WebhookReorder: 0.1}
	h, err := Start(context.Background(), HarnessConfig{
		Listen: cfg.Listen, DataDir: cfg.DataDir,
		Sim: sim.Config{Seed: cfg.Seed,
			Faults: faults,
			Webhooks: sim.Webhooks{ReadProbability: 0.6, FailProbability: 0.02, BatchSize: 10,
				Delay: sim.Range{Min: 50 * time.Millisecond, Max: 800 * time.Millisecond}},
		},
		// A short late window and a small P2 bound let the late-receipt
		// audit and P2 shedding show within a minute; a small Bloom filter
		// makes false positives (each confirmed against the store) show.
		Settings: map[string]any{"quiet_period": "5s", "gap_timeout": "20s", "backoff_base": "200ms", "backoff_cap": "5s",
			"cooldown_min": "5s", "cooldown_max": "20s", "late_window": "1s", "p2_max_depth": 60},
		Bloom: receipts.BloomConfig{ExpectedPerHour: 2000},
	})
	if err != nil {
		return DemoSummary{}, err
	}
	defer h.Close()
	accounts := []demoAccount{
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
	for _, a := range accounts {
		if err := h.AddAccount(ctx, a.id, a.pnid, a.rate, max(1, int(a.rate/10)), sim.Limits{Rate: a.metaRate}); err != nil {
			return DemoSummary{}, err
		}
	}
	promo := faults
	promo.Codes = map[int]float64{130429: 0.02}
	// Meta paces some marketing templates (held_for_quality_assessment):
	// their statuses come late, or never for a dropped one.
	promo.Paced, promo.PacedHold, promo.PacedDrop = 0.3, 10*time.Second, 0.2
	if err := h.Sim.SetFaults("100200300404", promo); err != nil {
		return DemoSummary{}, err
	}
	if cfg.Started != nil {
		cfg.Started(h.URL, h.APIKey)
	}

	var (
		mu        sync.Mutex
		seqOf     = map[string]int64{}
		toOf      = map[string]string{}
		submitted atomic.Int64
		rejected  atomic.Int64
	)
	rng := rand.New(rand.NewPCG(cfg.Seed, 11))
	next := make([]int64, len(accounts))
	owed := make([]float64, len(accounts)) // fractional messages carried to the next tick
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	// A lost message: about once a minute one seq of "support" is held
	// back, so the account's later seqs wait until gap_timeout skips it
	// (seq waiting, gaps skipped); 30 s later the client sends it after all
	// and it is parked as held, never sent out of order.
	type withheld struct {
		msg map[string]any
		due time.Time
	}
	var lost []withheld
	events := newOperatorEvents("100200300404")
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
		}
		if body, ok := events.next(time.Now()); ok {
			if err := h.PostWebhook(ctx, body); err != nil && ctx.Err() == nil {
				return DemoSummary{}, err
			}
		}
		// Owe messages for the time that really passed: a slow round (a
		// loaded machine, the race detector) makes the next batch larger
		// instead of lowering the offered rate.
		now := time.Now()
		elapsed := min(now.Sub(last).Seconds(), 2)
		last = now
		var batch []map[string]any
		for i, a := range accounts {
			owed[i] += a.offered * elapsed
			n := int(owed[i])
			owed[i] -= float64(n)
			window := make([]map[string]any, 0, n)
			for k := 0; k < n; k++ {
				next[i]++
				seq := next[i]
				to := fmt.Sprintf("49%03d%06d", i, rng.IntN(500))
				p := []string{"P0", "P1", "P1", "P1", "P2"}[rng.IntN(5)]
				msg := map[string]any{"biz_type": "demo", "account_id": a.id, "client_seq": seq, "to": to,
					"priority": p, "type": "text", "text": map[string]any{"body": fmt.Sprintf("order %d update", seq)}}
				if a.id == "promo-overdriven" && seq%10 == 0 {
					// A marketing template now and then, which "Meta" paces.
					delete(msg, "text")
					msg["type"], msg["template"] = "template", map[string]any{"name": "spring_sale",
						"language": map[string]any{"code": "en_US"}}
				}
				if a.id == "support" && seq%600 == 50 {
					lost = append(lost, withheld{msg, now.Add(30 * time.Second)})
					continue
				}
				window = append(window, msg)
			}
			rng.Shuffle(len(window), func(x, y int) { window[x], window[y] = window[y], window[x] })
			batch = append(batch, window...)
			// Client retries: repeat about one message in ten (at least one
			// per non-empty window); they must come back as duplicates.
			for k := 0; k < (len(window)+9)/10; k++ {
				batch = append(batch, window[rng.IntN(len(window))])
			}
		}
		for len(lost) > 0 && !now.Before(lost[0].due) {
			batch = append(batch, lost[0].msg)
			lost = lost[1:]
		}
		// Messages without an account: routed to the pool, sticky per customer.
		for k := 0; k < 2; k++ {
			batch = append(batch, map[string]any{"biz_type": "notice", "to": fmt.Sprintf("44700%06d", rng.IntN(200)),
				"type": "text", "text": map[string]any{"body": "your appointment is tomorrow"}})
		}
		var out struct {
			Results []struct {
				MsgID     string         `json:"msg_id"`
				Duplicate bool           `json:"duplicate"`
				Error     map[string]any `json:"error"`
			} `json:"results"`
		}
		if err := h.Do(ctx, "POST", "/v1/messages:batch", map[string]any{"messages": batch}, &out); err != nil {
			if ctx.Err() != nil {
				break
			}
			return DemoSummary{}, err
		}
		mu.Lock()
		for k, r := range out.Results {
			switch {
			case r.Error != nil:
				rejected.Add(1)
			case !r.Duplicate:
				submitted.Add(1)
				if seq, ok := batch[k]["client_seq"].(int64); ok {
					seqOf[r.MsgID] = seq
					toOf[r.MsgID] = batch[k]["to"].(string)
				}
			}
		}
		mu.Unlock()
	}

	st := h.Sim.Stats()
	sum := DemoSummary{
		Submitted: submitted.Load(), Accepted: st.Totals.Accepted, DuplicatesAtProvider: st.Totals.Duplicates,
		OverLimit: st.Totals.OverLimit, Provider429: st.Totals.Rejected[130429],
		Retries:             sumMetric(h.Registry(), "wamux_send_retries_total", "", ""),
		Resends:             sumMetric(h.Registry(), "wamux_resends_total", "outcome", "resent"),
		RejectedSubmissions: rejected.Load(),
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range accounts {
		last := map[string]int64{}
		seen := map[string]bool{}
		for _, m := range h.Sim.Messages(a.pnid, "") {
			seq, ok := seqOf[m.CallbackData]
			if !ok || seen[m.CallbackData] {
				continue
			}
			seen[m.CallbackData] = true
			to := toOf[m.CallbackData]
			if seq <= last[to] {
				sum.OrderViolations++
			}
			last[to] = max(last[to], seq)
		}
	}
	return sum, nil
}
