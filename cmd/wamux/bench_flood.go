package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/wamux/wamux/bench"
)

// runBenchFlood is `wamux bench flood`: clients submitting far past one
// account's rate, against the in-process gateway.
func runBenchFlood(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wamux bench flood", flag.ContinueOnError)
	fs.SetOutput(stderr)
	clients := fs.Int("clients", 2, "concurrent clients posting batches back to back")
	batch := fs.Int("batch", 1000, "messages per POST /v1/messages:batch")
	duration := fs.Duration("duration", 30*time.Second, "how long the clients post")
	rate := fs.Float64("rate", 5, "the flooded account's rate_per_sec")
	unbounded := fs.Bool("unbounded", false, "lift the queue bounds and the per-key request limit to their maxima (the baseline)")
	depth := fs.Int("queue-max-depth", 0, "the gateway's queue_max_depth (0: its default)")
	restart := fs.Bool("restart", false, "then start `wamux serve` on the same data in a child process: time to /readyz, its peak RSS")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: wamux bench flood [flags]")
		fmt.Fprintln(stderr, "\nClients post batches of texts to one account of --rate msg/s for --duration. Reports items accepted,")
		fmt.Fprintln(stderr, "refused (429 queue_full or rate_limited, with their Retry-After), stored, the queue depth, the process's")
		fmt.Fprintln(stderr, "peak RSS, and with --restart a restart of the gateway on the flooded data.")
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
	cfg := bench.FloodConfig{Clients: *clients, Batch: *batch, Duration: *duration, Rate: *rate, Unbounded: *unbounded, QueueMaxDepth: *depth}
	if *restart {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "wamux bench flood: %v\n", err)
			return 1
		}
		cfg.Serve = []string{exe}
	}
	rep, err := bench.RunFlood(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "wamux bench flood: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		bound := "queue bounds on"
		if rep.Unbounded {
			bound = "unbounded"
		}
		fmt.Fprintf(stdout, "%d clients × batches of %d for %.0fs, account at %g/s, %s: %d requests\n", rep.Clients, rep.Batch,
			rep.DurationSec, rep.Rate, bound, rep.Requests)
		codes := []string{}
		for c, n := range rep.RefusedByCode {
			codes = append(codes, fmt.Sprintf("%s %d", c, n))
		}
		sort.Strings(codes)
		if len(codes) == 0 {
			codes = append(codes, "none")
		}
		fmt.Fprintf(stdout, "items     %d accepted, %d refused (%s; Retry-After %d–%d s), %d other errors\n", rep.Accepted,
			rep.Refused, strings.Join(codes, ", "), rep.RetryAfterMin, rep.RetryAfterMax, rep.Other)
		fmt.Fprintf(stdout, "stored    %d (%d not accepted), queue_depth %v\n", rep.Stored, rep.StoredNotAccept, rep.QueueDepth)
		fmt.Fprintf(stdout, "memory    peak RSS %.0f MiB (clients, simulator and gateway in one process)\n", rep.PeakRSSMiB)
		if rep.RestartSec > 0 {
			fmt.Fprintf(stdout, "restart   ready in %.2fs, peak RSS %.0f MiB, queue_depth %v\n", rep.RestartSec, rep.RestartRSSMiB, rep.RestartQueued)
		}
	}
	if rep.StoredNotAccept != 0 {
		fmt.Fprintf(stderr, "wamux bench flood: %d messages stored that were not accepted (or the other way round)\n", rep.StoredNotAccept)
		return 1
	}
	return 0
}
