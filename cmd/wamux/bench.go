package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"strings"
)

// benchKinds are the measurements `wamux bench` can run; each lives in its
// own file (bench_*.go) and writes its report to stdout.
var benchKinds = map[string]struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}{
	"edge":     {"slow webhook bodies and 20,000 idle connections against wamux serve: /healthz latency, peak RSS, refusals", runBenchEdge},
	"events":   {"receipts → message.status events → one subscription's receiver: events/s, latency, receipts/s with vs without, ceiling", runBenchEvents},
	"flood":    {"clients submitting far past one account's rate: accepted, refused with Retry-After, stored, peak RSS, restart", runBenchFlood},
	"outbound": {"N accounts at their rate against the simulator: utilization, 429s, order, duplicates", runBenchOutbound},
	"receipts": {"receipts through the pipeline vs raw batched inserts: rate, lost, double-applied, mismatches", runBenchReceipts},
	"webhook":  {"signed webhook POSTs through the real handler vs a bare HMAC handler", runBenchWebhook},
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	args, stop, err := startProfiles(args, stderr)
	defer stop()
	if err != nil {
		fmt.Fprintf(stderr, "wamux bench: %v\n", err)
		return 1
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		w := stderr
		if len(args) > 0 {
			w = stdout
		}
		fmt.Fprintln(w, "usage: wamux bench [--cpuprofile=FILE] [--memprofile=FILE] [--trace=FILE] <kind> [flags] [--json]")
		fmt.Fprintln(w, "\nThe profile options come before the kind, in any order.")
		fmt.Fprintln(w, "\nkinds:")
		for _, k := range []string{"edge", "events", "flood", "outbound", "receipts", "webhook"} {
			fmt.Fprintf(w, "  %-9s %s\n", k, benchKinds[k].summary)
		}
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	k, ok := benchKinds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "wamux bench: unknown kind %q (edge, events, flood, outbound, receipts, webhook)\n", args[0])
		return 2
	}
	return k.run(ctx, args[1:], stdout, stderr)
}

// startProfiles takes the profile options before the kind, in any order,
// and returns the arguments after them and a stop that writes the
// profiles. --cpuprofile=FILE writes a Go CPU profile of the whole run,
// which is how the figures in docs/BENCHMARKS.md are explained;
// --memprofile=FILE the allocations of the whole run (heap profile written
// at the end: alloc_space says where the garbage the collector spends its
// share on comes from); --trace=FILE a runtime execution trace: where the
// run waits rather than computes (go tool trace -pprof=sync|syscall|sched
// FILE). stop is safe to call after an error.
func startProfiles(args []string, stderr io.Writer) (rest []string, stop func(), err error) {
	var stops []func()
	memPath := ""
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		if memPath == "" {
			return
		}
		f, err := os.Create(memPath)
		if err == nil {
			err = errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
		}
		if err != nil {
			fmt.Fprintf(stderr, "wamux bench: memprofile: %v\n", err)
		}
	}
	record := func(path string, start func(io.Writer) error, end func()) error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := start(f); err != nil {
			f.Close()
			return err
		}
		stops = append(stops, func() { end(); f.Close() })
		return nil
	}
	for ; len(args) > 0; args = args[1:] {
		name, path, hasPath := strings.Cut(args[0], "=")
		switch strings.TrimLeft(name, "-") {
		case "memprofile", "cpuprofile", "trace":
			if !strings.HasPrefix(name, "-") {
				return args, stop, nil
			}
			if !hasPath || path == "" {
				return args, stop, fmt.Errorf("%s needs a file: %s=FILE, before the kind", name, name)
			}
		default:
			return args, stop, nil
		}
		switch strings.TrimLeft(name, "-") {
		case "memprofile":
			memPath = path
		case "cpuprofile":
			err = record(path, pprof.StartCPUProfile, pprof.StopCPUProfile)
		case "trace":
			err = record(path, trace.Start, trace.Stop)
		}
		if err != nil {
			return args, stop, err
		}
	}
	return args, stop, nil
}
