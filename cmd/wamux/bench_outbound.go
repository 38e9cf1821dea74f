package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/wamux/wamux/bench"
	"github.com/wamux/wamux/sim"
)

func runBenchOutbound(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wamux bench outbound", flag.ContinueOnError)
	fs.SetOutput(stderr)
	accounts := fs.Int("accounts", 10, "number of accounts (simulated phone numbers)")
	rate := fs.Float64("rate", 80, "messages/s each account may send (Meta's limit and wamux's)")
	duration := fs.Duration("duration", 10*time.Second, "how long the traffic would take at full rate")
	load := fs.Float64("load", 1, "clients offer this fraction of the accounts' capacity for the duration (1: every account at its rate; 1.2: sustained overload; 0.5: latency below capacity; 0: everything submitted at once, a submission flood)")
	faults := fs.String("faults", "", "simulator faults, e.g. 5xx=0.01,reset=0.005,slow=0.002,dup_webhook=0.1,reorder=0.1")
	latency := fs.String("latency", "", "the simulator answers each send this long after counting it: a duration (150ms) or a uniform range (150ms-400ms)")
	jitter := fs.Duration("jitter", 0, "the simulator holds each send a uniform draw up to this long before counting it (network jitter)")
	burst := fs.Int("burst", 0, "the accounts' burst (0: created without one, with the API's default)")
	strict := fs.Bool("strict-second", true, "the simulator refuses a message that would make more than --rate in any one second (false: its bucket alone, --rate with a burst of one second's worth)")
	seed := fs.Uint64("seed", 1, "seed for traffic and simulator draws")
	store := fs.String("store", "sqlite", `"sqlite" or a PostgreSQL URL (a fresh schema, dropped afterwards)`)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: wamux bench outbound [flags]")
		fmt.Fprintln(stderr, "\nRuns the gateway and the simulator in this process: N accounts, Rate×Duration messages each with")
		fmt.Fprintln(stderr, "shuffled client_seq, and reports utilization, 429s, attempts, duplicates and order from the simulator.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if !noArgs(fs, stderr) {
		return 2
	}
	f, err := parseFaults(*faults)
	if err != nil {
		fmt.Fprintf(stderr, "wamux bench outbound: %v\n", err)
		return 2
	}
	if f.Latency, err = parseLatency(*latency); err != nil || *jitter < 0 || *burst < 0 {
		if err == nil {
			err = fmt.Errorf("--jitter and --burst must not be negative")
		}
		fmt.Fprintf(stderr, "wamux bench outbound: %v\n", err)
		return 2
	}
	f.Jitter = *jitter
	cfg := bench.OutboundConfig{Accounts: *accounts, Rate: *rate, Duration: *duration, Faults: f, Load: *load, Seed: *seed, Store: *store,
		Burst: *burst, StrictSecond: *strict}
	if !*asJSON {
		cfg.Progress = func(acc, total int64) { fmt.Fprintf(stderr, "accepted %d/%d\n", acc, total) }
	}
	rep, err := bench.RunOutbound(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "wamux bench outbound: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
		return 0
	}
	fmt.Fprintf(stdout, "accounts %d × %.0f/s (burst %d, strict second %v) for %s: submitted %d, accepted %d in %.1fs\n",
		rep.Accounts, rep.RatePerAccount, rep.Burst, rep.StrictSecond, *duration, rep.Submitted, rep.Accepted, rep.ElapsedSec)
	fmt.Fprintf(stdout, "utilization %.3f  429s %d (%.4f)  avg attempts %.3f  duplicates %d  order violations %d  over limit %d  retries %.0f  resends %.0f\n",
		rep.Utilization, rep.Provider429, rep.Rate429, rep.AvgAttempts, rep.DuplicatesAtProvider, rep.OrderViolations, rep.OverLimit, rep.Retries, rep.Resends)
	for _, p := range []string{"P0", "P1", "P2"} {
		l := rep.Latency[p]
		fmt.Fprintf(stdout, "%s submit→accepted p50 %.1f ms  p99 %.1f ms  (n=%d)\n", p, l.P50, l.P99, l.N)
	}
	return 0
}

// parseFaults reads "name=probability,…" into simulator faults.
func parseFaults(s string) (sim.Faults, error) {
	var f sim.Faults
	if strings.TrimSpace(s) == "" {
		return f, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		p, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil || p < 0 || p > 1 {
			return f, fmt.Errorf("fault %q: want name=probability in [0,1]", part)
		}
		switch k {
		case "5xx":
			f.ServerError = p
		case "reset":
			f.Reset = p
		case "reset_after_accept":
			f.ResetAfterAccept = p
		case "5xx_after_accept":
			f.ServerErrorAfterAccept = p
		case "slow":
			f.SlowAccept = p
			f.SlowDelay = 3 * time.Second
		case "dup_webhook":
			f.WebhookDuplicate = p
		case "reorder":
			f.WebhookReorder = p
		default:
			return f, fmt.Errorf("unknown fault %q (5xx, 5xx_after_accept, reset, reset_after_accept, slow, dup_webhook, reorder)", k)
		}
	}
	return f, nil
}

// parseLatency reads "150ms" or "150ms-400ms" into a simulator latency
// range; "" is none.
func parseLatency(s string) (sim.Range, error) {
	if s == "" {
		return sim.Range{}, nil
	}
	lo, hi, isRange := strings.Cut(s, "-")
	minD, err := time.ParseDuration(lo)
	maxD := minD
	if err == nil && isRange {
		maxD, err = time.ParseDuration(hi)
	}
	if err != nil || minD < 0 || maxD < minD {
		return sim.Range{}, fmt.Errorf("--latency %q: want a duration (150ms) or a range (150ms-400ms)", s)
	}
	return sim.Range{Min: minD, Max: maxD}, nil
}
