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
	"outbound": {"N accounts at their rate against the simulator: utilization, 429s, order, duplicates", runBenchOutbound},
	"receipts": {"receipts through the pipeline vs raw batched inserts: rate, lost, double-applied, mismatches", runBenchReceipts},
	"webhook":  {"signed webhook POSTs through the real handler vs a bare HMAC handler", runBenchWebhook},
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// --cpuprofile=FILE before the kind writes a Go CPU profile of the
	// whole run, which is how the figures in docs/BENCHMARKS.md are
	// explained; --memprofile=FILE the allocations of the whole run (heap
	// profile written at the end: alloc_space says where the garbage the
	// collector spends its share on comes from).
	if len(args) > 0 && strings.HasPrefix(args[0], "--memprofile=") {
		path := strings.TrimPrefix(args[0], "--memprofile=")
		args = args[1:]
		defer func() {
			f, err := os.Create(path)
			if err == nil {
				err = errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
			}
			if err != nil {
				fmt.Fprintf(stderr, "wamux bench: memprofile: %v\n", err)
			}
		}()
	}
	// --trace=FILE (after --cpuprofile) writes a runtime execution trace:
	// where the run waits rather than computes (go tool trace
	// -pprof=sync|syscall|sched FILE).
	for _, rec := range []struct {
		flag  string
		start func(io.Writer) error
		stop  func()
	}{
		{"--cpuprofile=", pprof.StartCPUProfile, pprof.StopCPUProfile},
		{"--trace=", trace.Start, trace.Stop},
	} {
		if len(args) == 0 || !strings.HasPrefix(args[0], rec.flag) {
			continue
		}
		f, err := os.Create(strings.TrimPrefix(args[0], rec.flag))
		if err == nil {
			if err = rec.start(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "wamux bench: %v\n", err)
			return 1
		}
		args = args[1:]
		defer f.Close()
		defer rec.stop()
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		w := stderr
		if len(args) > 0 {
			w = stdout
		}
		fmt.Fprintln(w, "usage: wamux bench [--memprofile=FILE] [--cpuprofile=FILE] [--trace=FILE] <kind> [flags] [--json]")
		fmt.Fprintln(w, "\nkinds:")
		for _, k := range []string{"outbound", "receipts", "webhook"} {
			fmt.Fprintf(w, "  %-9s %s\n", k, benchKinds[k].summary)
		}
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	k, ok := benchKinds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "wamux bench: unknown kind %q (outbound, receipts, webhook)\n", args[0])
		return 2
	}
	return k.run(ctx, args[1:], stdout, stderr)
}
