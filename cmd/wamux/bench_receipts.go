package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/wamux/wamux/bench"
)

// runBenchReceipts is `wamux bench receipts`: the receipt pipeline from the
// normalized receipt onward, against raw batched inserts of the same rows.
func runBenchReceipts(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wamux bench receipts", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("receipts", 1_000_000, "receipts to feed, duplicates included")
	m := fs.Int("messages", 0, "messages they are about (0: a third of the distinct receipts)")
	dup := fs.Float64("dup", 0.2, "share of receipts that repeat another")
	reorder := fs.Float64("reorder", 0.1, "share of distinct receipts moved to a random place in the stream")
	storeSpec := fs.String("store", "sqlite", `"sqlite" (a fresh file in a temporary directory) or a PostgreSQL URL (a fresh schema, dropped afterwards)`)
	batch := fs.Int("batch", 100, "receipts per Ingest call")
	callers := fs.Int("callers", 32, "concurrent Ingest callers")
	seed := fs.Uint64("seed", 1, "seed of the generated stream")
	ids := fs.String("wamids", bench.WAMIDsRandom, `provider message ids: "random" (shaped like the Cloud API's, sorting in no useful order, as real ones) or "sequential" (sorting in sending order, which flatters index inserts)`)
	bloomPerHour := fs.Uint("bloom-per-hour", 0, "distinct receipt keys an hour the L2 Bloom filter is sized for (0: the gateway's default, receipt_bloom_per_hour); the whole stream falls in about one hour")
	baseline := fs.Bool("baseline", true, "also time raw batched inserts of the same rows (false: the pipeline alone, e.g. for a CPU profile)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: wamux bench receipts [flags]")
		fmt.Fprintln(stderr, "\nFeeds N receipts over M messages, with duplicates and reordering, through the real receipt pipeline")
		fmt.Fprintln(stderr, "(from the normalized receipt on; `wamux bench webhook` measures the HTTP path), checks every receipt")
		fmt.Fprintln(stderr, "and final state against an independent computation, then times raw batched inserts of the same rows.")
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
	rep, err := bench.RunReceipts(ctx, bench.ReceiptsConfig{Receipts: *n, Messages: *m, Dup: *dup, Reorder: *reorder,
		Store: *storeSpec, Batch: *batch, Callers: *callers, Seed: *seed, WAMIDs: *ids, BloomPerHour: *bloomPerHour, NoBaseline: !*baseline})
	if err != nil {
		fmt.Fprintf(stderr, "wamux bench receipts: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		fmt.Fprintf(stdout, "%s: %d receipts (%d distinct) over %d messages (%s wamids), dup %.0f%%, reorder %.0f%%\n",
			rep.Store, rep.Receipts, rep.Distinct, rep.Messages, rep.WAMIDs, 100*rep.DupRate, 100*rep.ReorderRate)
		fmt.Fprintf(stdout, "pipeline  %.0f receipts/s (%.1fs), p50 %.0f ms, p99 %.0f ms\n", rep.ReceiptsPerSec, rep.ElapsedSec, rep.LatencyP50Ms, rep.LatencyP99Ms)
		if *baseline {
			fmt.Fprintf(stdout, "baseline  %.0f rows/s raw inserts (%.1fs); ratio %.2f\n", rep.BaselineRowsPerSec, rep.BaselineElapsedSec, rep.Ratio)
		} else {
			fmt.Fprintln(stdout, "baseline  not timed (--baseline=false)")
		}
		fmt.Fprintf(stdout, "lost %d, double applied %d, final state mismatches %d\n", rep.Lost, rep.DoubleApplied, rep.FinalStateMismatches)
		fmt.Fprintf(stdout, "dedup hits: batch %d, lru %d, bloom %d, store %d; bloom false positives %d\n", rep.DedupHits["batch"],
			rep.DedupHits["lru"], rep.DedupHits["bloom"], rep.DedupHits["store"], rep.BloomFalsePositives)
	}
	if rep.Lost > 0 || rep.DoubleApplied > 0 || rep.FinalStateMismatches > 0 {
		return 1
	}
	return 0
}

// runBenchWebhook is `wamux bench webhook`: signed POSTs through the real
// handler against a bare handler that only reads the body and checks the
// HMAC.
func runBenchWebhook(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wamux bench webhook", flag.ContinueOnError)
	fs.SetOutput(stderr)
	posts := fs.Int("posts", 100_000, "POSTs per handler")
	statuses := fs.Int("statuses", 1, "statuses per POST")
	concurrency := fs.Int("concurrency", 32, "POSTs in flight")
	storeSpec := fs.String("store", "sqlite", `"sqlite" or a PostgreSQL URL`)
	ids := fs.String("wamids", bench.WAMIDsRandom, `provider message ids: "random" (like real ones) or "sequential" (sorting in sending order, which flatters index inserts)`)
	rounds := fs.Int("rounds", 5, "parts the POSTs are split into, each sent to the bare handler and then to the real one")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: wamux bench webhook [flags]")
		fmt.Fprintln(stderr, "\nSigned Cloud API status webhooks over loopback HTTP: the real /webhook handler (durable before 200)")
		fmt.Fprintln(stderr, "against a bare net/http handler that only reads the body and checks the signature.")
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
	rep, err := bench.RunWebhook(ctx, bench.WebhookConfig{Posts: *posts, Statuses: *statuses, Concurrency: *concurrency, Store: *storeSpec,
		WAMIDs: *ids, Rounds: *rounds})
	if err != nil {
		fmt.Fprintf(stderr, "wamux bench webhook: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
		return 0
	}
	fmt.Fprintf(stdout, "%s: %d POSTs × %d statuses (%s wamids), %d in flight, %d rounds\n", rep.Store, rep.Posts, rep.StatusesPerPost,
		rep.WAMIDs, rep.Concurrency, rep.Rounds)
	fmt.Fprintf(stdout, "real handler %.0f POSTs/s (p50 %.1f ms, p99 %.1f ms), %.0f µs CPU per POST\n", rep.PostsPerSec, rep.P50Ms, rep.P99Ms,
		rep.CPUMicrosPerPost)
	fmt.Fprintf(stdout, "bare handler %.0f POSTs/s (p50 %.1f ms, p99 %.1f ms), %.0f µs CPU per POST\n", rep.BarePostsPerSec, rep.BareP50Ms,
		rep.BareP99Ms, rep.BareCPUMicrosPerPost)
	fmt.Fprintf(stdout, "ratio %.2f\n", rep.Ratio)
	return 0
}
