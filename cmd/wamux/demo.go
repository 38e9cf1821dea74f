package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/wamux/wamux/bench"
)

// runDemo runs gateway, simulator and traffic in one process until
// interrupted, or for --duration, then prints a summary.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wamux demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8080", "gateway address (use 127.0.0.1:0 for any free port)")
	dataDir := fs.String("data-dir", "", "directory for the demo's SQLite database (default: a temporary one)")
	duration := fs.Duration("duration", 0, "stop after this long (default: run until interrupted)")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	seed := fs.Uint64("seed", 1, "seed for traffic and simulator draws")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: wamux demo [flags]")
		fmt.Fprintln(stderr, "\nRuns the gateway, the Cloud API simulator and traffic (shuffled client_seq, client retries,")
		fmt.Fprintln(stderr, "5xx, resets, slow answers, duplicated and reordered webhooks, one throttled account) in one process.")
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
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	sum, err := bench.RunDemo(ctx, bench.DemoConfig{Listen: *listen, DataDir: *dataDir, Seed: *seed,
		Started: func(url, key string) {
			fmt.Fprintf(stderr, "wamux demo: dashboard at %s/\n", url)
			fmt.Fprintf(stderr, "wamux demo: API key for this run: %s (e.g. curl -H 'Authorization: Bearer %s' %s/v1/accounts)\n", key, key, url)
			if *duration == 0 {
				fmt.Fprintln(stderr, "wamux demo: press Ctrl-C to stop")
			}
		},
		Stopping: func() {
			fmt.Fprintln(stderr, "wamux demo: traffic stopped; checking the events against every message's final status")
		}})
	if err != nil {
		fmt.Fprintf(stderr, "wamux demo: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(sum)
		return 0
	}
	fmt.Fprintf(stdout, "submitted %d, accepted %d, duplicates at provider %d, order violations %d, over limit %d, 429s %d, retries %.0f, resends %.0f\n",
		sum.Submitted, sum.Accepted, sum.DuplicatesAtProvider, sum.OrderViolations, sum.OverLimit, sum.Provider429, sum.Retries, sum.Resends)
	ev := sum.Events
	fmt.Fprintf(stdout, "events received %d (distinct %d, duplicates %d; message.status %d, message.inbound %d, account.state %d), missing %d, out of order %d, bad signatures %d; %d messages checked, %d in flight\n",
		ev.Received, ev.Distinct, ev.Duplicates, ev.ByType["message.status"], ev.ByType["message.inbound"], ev.ByType["account.state"],
		ev.Missing, ev.OutOfOrder, ev.BadSignatures, ev.Checked, ev.InFlight)
	return 0
}
