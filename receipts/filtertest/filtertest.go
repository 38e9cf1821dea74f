// Package filtertest is the conformance suite every receipts.Filter
// passes: the in-process Bloom and the Redis one.
package filtertest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux/receipts"
)

// NewFilter builds a fresh, empty Filter sized by cfg (its Now and
// Disabled are not used).
type NewFilter func(t *testing.T, cfg receipts.BloomConfig) receipts.Filter

// Options describe what an implementation can do.
type Options struct {
	// NewNode, when set, builds a second Filter sharing the filters of the
	// one the last NewFilter call of the same test built (another node).
	NewNode NewFilter
}

// t0 is the start of an hour bucket.
var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// Run runs the suite.
func Run(t *testing.T, newFilter NewFilter, opts Options) {
	t.Run("NoFalseNegatives", func(t *testing.T) { testNoFalseNegatives(t, newFilter) })
	t.Run("HoursExpire", func(t *testing.T) { testHoursExpire(t, newFilter) })
	t.Run("FalsePositiveRate", func(t *testing.T) { testFalsePositiveRate(t, newFilter) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, newFilter, nil) })
	if opts.NewNode != nil {
		t.Run("NodesShareOneFilter", func(t *testing.T) { testConcurrent(t, newFilter, opts.NewNode) })
	}
}

func items(prefix string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "%s-%d", prefix, i)
	}
	return out
}

func insert(t *testing.T, f receipts.Filter, its [][]byte, at time.Time) {
	t.Helper()
	if err := f.Insert(t.Context(), its, at); err != nil {
		t.Fatalf("Insert of %d items at %v: %v", len(its), at, err)
	}
}

func test(t *testing.T, f receipts.Filter, its [][]byte, at time.Time) []bool {
	t.Helper()
	got, err := f.Test(t.Context(), its, at)
	if err != nil {
		t.Fatalf("Test of %d items at %v: %v", len(its), at, err)
	}
	if len(got) != len(its) {
		t.Fatalf("Test of %d items answered %d", len(its), len(got))
	}
	return got
}

// testNoFalseNegatives: an item added in some hour is known from that
// hour on, for the whole window, whatever else was added.
func testNoFalseNegatives(t *testing.T, newFilter NewFilter) {
	f := newFilter(t, receipts.BloomConfig{ExpectedPerHour: 1000})
	batches := map[time.Duration][][]byte{}
	for _, h := range []time.Duration{0, 1, 5, 30} {
		batches[h] = items(fmt.Sprint("h", h), 500)
		insert(t, f, batches[h], t0.Add(h*time.Hour+17*time.Minute))
	}
	if got := test(t, f, nil, t0); len(got) != 0 {
		t.Fatalf("Test of no items: %v", got)
	}
	for h, its := range batches {
		for _, later := range []time.Duration{h * time.Hour, h*time.Hour + 59*time.Minute, 31 * time.Hour, 47*time.Hour + 59*time.Minute} {
			for i, ok := range test(t, f, its, t0.Add(later)) {
				if !ok {
					t.Fatalf("item %q added in hour %d not known %v after t0", its[i], h, later)
				}
			}
		}
	}
}

// testHoursExpire: an hour's items are known for BloomHours hours from
// the start of their hour, and not before their hour.
func testHoursExpire(t *testing.T, newFilter NewFilter) {
	f := newFilter(t, receipts.BloomConfig{ExpectedPerHour: 1000})
	its := items("x", 100)
	at := t0.Add(10 * time.Hour)
	insert(t, f, its, at.Add(30*time.Minute))
	count := func(when time.Time) int {
		n := 0
		for _, ok := range test(t, f, its, when) {
			if ok {
				n++
			}
		}
		return n
	}
	if n := count(at.Add(receipts.BloomHours*time.Hour - time.Second)); n != len(its) {
		t.Fatalf("at the last second of the window: %d of %d items known", n, len(its))
	}
	if n := count(at.Add(receipts.BloomHours * time.Hour)); n > 2 {
		t.Fatalf("once the hour left the window: %d of %d items still known", n, len(its))
	}
	if n := count(at.Add(-time.Second)); n > 2 {
		t.Fatalf("in the hour before they were added: %d of %d items known", n, len(its))
	}
}

// testFalsePositiveRate: filled to ExpectedPerHour in three hours, the
// filter says "maybe" to items never added at most half as often again as
// the three hours' share of FalsePositiveRate.
func testFalsePositiveRate(t *testing.T, newFilter NewFilter) {
	const perHour, hours, probes = 2000, 3, 20000
	cfg := receipts.BloomConfig{ExpectedPerHour: perHour, FalsePositiveRate: 0.48}
	f := newFilter(t, cfg)
	for h := range hours {
		insert(t, f, items(fmt.Sprint("added", h), perHour), t0.Add(time.Duration(h)*time.Hour))
	}
	at := t0.Add((hours - 1) * time.Hour)
	fp := 0
	for _, ok := range test(t, f, items("never", probes), at) {
		if ok {
			fp++
		}
	}
	rate := float64(fp) / probes
	bound := 1.5 * cfg.FalsePositiveRate * hours / receipts.BloomHours
	t.Logf("false-positive rate %.4f over %d hours at %d items an hour (bound %.4f)", rate, hours, perHour, bound)
	if rate > bound {
		t.Fatalf("false-positive rate %.4f, want at most %.4f", rate, bound)
	}
}

// testConcurrent: items inserted at once, through one Filter or two
// nodes', are all known to every node.
func testConcurrent(t *testing.T, first, second NewFilter) {
	cfg := receipts.BloomConfig{ExpectedPerHour: 1000}
	nodes := []receipts.Filter{first(t, cfg)}
	if second != nil {
		nodes = append(nodes, second(t, cfg))
	} else {
		nodes = append(nodes, nodes[0])
	}
	var wg sync.WaitGroup
	var all [][]byte
	for i := range 8 {
		its := items(fmt.Sprint("w", i), 50)
		all = append(all, its...)
		f := nodes[i%2]
		wg.Go(func() {
			if err := f.Insert(t.Context(), its, t0); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for n, f := range nodes {
		for i, ok := range test(t, f, all, t0.Add(time.Minute)) {
			if !ok {
				t.Fatalf("node %d does not know %q", n, all[i])
			}
		}
	}
}
