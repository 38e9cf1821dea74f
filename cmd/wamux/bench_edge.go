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

// runBenchEdge is `wamux bench edge`: slow webhook bodies and idle
// keep-alive connections against `wamux serve` children.
func runBenchEdge(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wamux bench edge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	slowConns := fs.Int("slow-conns", 300, "connections sending slow webhook bodies with a wrong signature (0: skip the phase)")
	bodyBytes := fs.Int("body-bytes", 3<<20, "bytes of each slow body (Content-Length)")
	bodyRate := fs.Int("body-rate", 256<<10, "bytes/s each slow connection sends")
	slowFor := fs.Duration("slow-duration", 30*time.Second, "how long the slow-body attack lasts")
	conns := fs.Int("conns", 20000, "idle keep-alive connections (0: skip the phase); at most this process's open-file limit less 200")
	hold := fs.Duration("hold", 15*time.Second, "how long the connections are held once opened")
	maxConns := fs.Int("max-connections", 0, "the gateway's max_connections in the connection phase (0: its default, half its open-file limit)")
	baseline := fs.Bool("baseline", true, "repeat the connection phase with max_connections far above the gateway's file limit")
	nofile := fs.Int("gateway-nofile", 10000, "the gateway's open-file limit (0: this process's); below the clients' so their connections can exhaust it")
	idle := fs.Duration("idle", 5*time.Second, "how long /healthz is probed on the idle gateway before each attack")
	every := fs.Duration("probe-every", 100*time.Millisecond, "interval of the /healthz probes (each on a new connection)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: wamux bench edge [flags]")
		fmt.Fprintln(stderr, "\nStarts `wamux serve` children and attacks their edge while probing /healthz: slow webhook bodies with a")
		fmt.Fprintln(stderr, "wrong signature (the gateway's peak RSS, VmHWM, and /healthz latency), then idle keep-alive connections")
		fmt.Fprintln(stderr, "(/healthz latency, connections held, closed, unanswered and not accepted), with and without the connection cap.")
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
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "wamux bench edge: %v\n", err)
		return 1
	}
	rep, err := bench.RunEdge(ctx, bench.EdgeConfig{Serve: []string{exe}, GatewayNoFile: *nofile, Idle: *idle, ProbeEvery: *every,
		SlowConns: *slowConns, BodyBytes: *bodyBytes, BodyRate: *bodyRate, SlowDuration: *slowFor,
		IdleConns: *conns, IdleHold: *hold, MaxConnections: *maxConns, Baseline: *baseline})
	if err != nil {
		fmt.Fprintf(stderr, "wamux bench edge: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
		return 0
	}
	printEdge(stdout, rep)
	return 0
}

func printEdge(w io.Writer, rep *bench.EdgeReport) {
	probes := func(p bench.Probes) string {
		return fmt.Sprintf("median %.1f ms, p95 %.1f ms, max %.1f ms (%d probes, %d failed)", p.P50, p.P95, p.Max, p.N, p.Failed)
	}
	fmt.Fprintf(w, "open files: this process %d (hard %d), gateway %d\n", rep.NoFileSoft, rep.NoFileHard, rep.GatewayNoFile)
	if s := rep.SlowBody; s != nil {
		var answers []string
		for code, n := range s.Answers {
			answers = append(answers, fmt.Sprintf("%d × %d", n, code))
		}
		sort.Strings(answers)
		fmt.Fprintf(w, "slow bodies: %d connections × %d bytes at %d B/s for %.0fs\n", s.Conns, s.BodyBytes, s.BodyRate, s.DurationSec)
		fmt.Fprintf(w, "  idle     /healthz %s; RSS %.0f MiB\n", probes(s.IdleProbes), s.IdleRSSMiB)
		fmt.Fprintf(w, "  attack   /healthz %s\n", probes(s.Probes))
		fmt.Fprintf(w, "  gateway  peak RSS (VmHWM) %.0f MiB, %.1f s of CPU; answers %s, %d without an answer; %.0f MiB sent\n",
			s.PeakRSSMiB, s.CPUSec, strings.Join(answers, ", "), s.NoAnswer, float64(s.BytesSent)/(1<<20))
	}
	for _, c := range rep.Conns {
		limit := "default (half the open files)"
		if c.MaxConnections > 0 {
			limit = fmt.Sprint(c.MaxConnections)
		}
		fmt.Fprintf(w, "idle connections: %d, max_connections %s\n", c.Conns, limit)
		fmt.Fprintf(w, "  idle     /healthz %s\n", probes(c.IdleProbes))
		fmt.Fprintf(w, "  opening  /healthz %s; %.1fs to open them\n", probes(c.RampProbes), c.RampSec)
		fmt.Fprintf(w, "           the gateway used %.1f s of CPU meanwhile\n", c.RampCPUSec)
		fmt.Fprintf(w, "  held     /healthz %s\n", probes(c.Probes))
		fmt.Fprintf(w, "  conns    %d held (%d still open after the hold), %d answered and closed, %d unanswered, %d not accepted; peak RSS %.0f MiB\n",
			c.Held, c.OpenAtEnd, c.Closed, c.Unanswered, c.DialFailed, c.PeakRSSMiB)
		if c.GatewayErrors != "" {
			fmt.Fprintf(w, "  gateway log: %s\n", strings.ReplaceAll(c.GatewayErrors, "\n", "\n               "))
		}
	}
}
