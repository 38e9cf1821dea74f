package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/wamux/wamux/bench"
)

// runBenchEvents is `wamux bench events`: message.status events from the
// receipt pipeline to one subscription's local receiver.
func runBenchEvents(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wamux bench events", flag.ContinueOnError)
	fs.SetOutput(stderr)
	messages := fs.Int("messages", 2000, "messages per round; each gets sent, delivered and read receipts")
	rounds := fs.Int("rounds", 6, "rounds, alternating without and with the subscription (even)")
	ceiling := fs.Int("ceiling", 20000, "events written while the subscription is disabled, then delivered at once (0: skip)")
	batch := fs.Int("batch", 100, "receipts per Ingest call")
	callers := fs.Int("callers", 16, "concurrent Ingest callers")
	storeSpec := fs.String("store", "sqlite", `"sqlite" (a temporary directory) or a PostgreSQL URL (a fresh schema, dropped afterwards)`)
	timeout := fs.Duration("timeout", bench.EventsTimeoutDefault, "longest wait for one round's or the ceiling's events to arrive")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: wamux bench events [flags]")
		fmt.Fprintln(stderr, "\nReceipts through the gateway's receipt pipeline move messages forward; one subscription delivers their")
		fmt.Fprintln(stderr, "message.status events to a local receiver that checks signatures and answers 204. Reports events/s,")
		fmt.Fprintln(stderr, "commit→2xx latency, receipts/s with and without the subscription (alternating rounds), and the")
		fmt.Fprintln(stderr, "deliverer's ceiling: events written while the subscription is disabled, delivered at once.")
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
	rep, err := bench.RunEvents(ctx, bench.EventsConfig{Messages: *messages, Rounds: *rounds, Ceiling: *ceiling, Batch: *batch,
		Callers: *callers, Store: *storeSpec, Timeout: *timeout})
	if err != nil {
		fmt.Fprintf(stderr, "wamux bench events: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		fmt.Fprintf(stdout, "%s: %d rounds of %d messages (3 receipts each), %d callers × %d receipts\n", rep.Store, len(rep.Rounds),
			rep.MessagesPerRound, rep.Callers, rep.Batch)
		fmt.Fprintf(stdout, "events    %d written, %d delivered, %d missing, %d duplicates, %d bad signatures\n", rep.Written,
			rep.Delivered, rep.Missing, rep.Duplicates, rep.BadSignatures)
		fmt.Fprintf(stdout, "delivery  %.0f events/s, commit→2xx p50 %.1f ms, p99 %.1f ms\n", rep.EventsPerSec, rep.LatencyP50Ms, rep.LatencyP99Ms)
		fmt.Fprintf(stdout, "receipts  %.0f/s with the subscription, %.0f/s without; ratio %.2f\n", rep.ReceiptsPerSecWith,
			rep.ReceiptsPerSecWithout, rep.Ratio)
		if rep.CeilingEvents > 0 {
			fmt.Fprintf(stdout, "ceiling   %d events in %.2fs: %.0f events/s, %d missing\n", rep.CeilingEvents, rep.CeilingSec,
				rep.CeilingEventsPerSec, rep.CeilingMissing)
		}
	}
	if rep.Missing > 0 || rep.CeilingMissing > 0 || rep.BadSignatures > 0 {
		return 1
	}
	return 0
}
