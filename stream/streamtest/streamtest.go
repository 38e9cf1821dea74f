// Package streamtest is the conformance suite every stream.Log backend
// passes: Run it from the backend's tests with a Factory for fresh
// streams.
package streamtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/wamux/wamux/stream"
)

// Factory makes a fresh, empty stream of the given number of partitions
// for one test and returns how to open a Log on it. Opening again after
// Close is a restart: what was appended and committed before stays. The
// suite closes every Log it opens.
type Factory func(t *testing.T, partitions int) (open func(t *testing.T) stream.Log)

// Run runs the suite; the subtests run in parallel, each on its own
// stream.
func Run(t *testing.T, f Factory) {
	tests := []struct {
		name string
		fn   func(*testing.T, Factory)
	}{
		{"AppendSetsPartitionAndOffsets", testAppendSetsPartitionAndOffsets},
		{"ConsumeInOffsetAndKeyOrder", testConsumeInOffsetAndKeyOrder},
		{"RestartResumesAfterCommit", testRestartResumesAfterCommit},
		{"GroupSplitsAndHandsOver", testGroupSplitsAndHandsOver},
		{"RevokeWaitsForInFlightBatch", testRevokeWaitsForInFlightBatch},
		{"ConcurrentAppendsLoseNothing", testConcurrentAppendsLoseNothing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, f)
		})
	}
}

// openLog opens a Log and closes it when t ends (a second Close is
// allowed to fail with ErrClosed).
func openLog(t *testing.T, open func(*testing.T) stream.Log) stream.Log {
	t.Helper()
	l := open(t)
	t.Cleanup(func() {
		if err := l.Close(); err != nil && !errors.Is(err, stream.ErrClosed) {
			t.Errorf("close: %v", err)
		}
	})
	return l
}

// records makes n records over keys, value "key#i" by key, starting at
// index from[key].
func records(keys []string, n int, from map[string]int) []stream.Record {
	rs := make([]stream.Record, n)
	for i := range rs {
		k := keys[i%len(keys)]
		rs[i] = stream.Record{Key: k, Value: fmt.Appendf(nil, "%s#%d", k, from[k])}
		from[k]++
	}
	return rs
}

// keysCovering returns keys such that every one of n partitions has at
// least per of them.
func keysCovering(n, per int) []string {
	count := make([]int, n)
	var keys []string
	for i, full := 0, 0; full < n; i++ {
		k := fmt.Sprintf("acct-%d", i)
		p := stream.PartitionOf(k, n)
		if count[p] < per {
			keys = append(keys, k)
			if count[p]++; count[p] == per {
				full++
			}
		}
	}
	return keys
}

func appendAll(t *testing.T, l stream.Log, rs []stream.Record) []stream.Record {
	t.Helper()
	if err := l.Append(context.Background(), rs); err != nil {
		t.Fatalf("append %d records: %v", len(rs), err)
	}
	return rs
}

// Append puts each record in wamux.PartitionOf's partition and gives the
// partition's records consecutive offsets from 0 in append order.
func testAppendSetsPartitionAndOffsets(t *testing.T, f Factory) {
	const n = 5
	l := openLog(t, f(t, n))
	if got := l.Partitions(); got != n {
		t.Fatalf("Partitions() = %d, want %d", got, n)
	}
	keys := keysCovering(n, 2)
	from := map[string]int{}
	next := map[int32]int64{}
	for range 4 {
		for _, r := range appendAll(t, l, records(keys, 3*len(keys), from)) {
			if want := stream.PartitionOf(r.Key, n); r.Partition != want {
				t.Errorf("%s: partition %d, want %d", show(r), r.Partition, want)
			}
			if r.Offset != next[r.Partition] {
				t.Errorf("%s: offset %d in partition %d, want %d", show(r), r.Offset, r.Partition, next[r.Partition])
			}
			next[r.Partition] = r.Offset + 1
		}
	}
	if err := l.Append(context.Background(), nil); err != nil {
		t.Errorf("append nothing: %v", err)
	}
}

// One member gets every partition and each partition's records once, in
// offset order, so each key's records in append order.
func testConsumeInOffsetAndKeyOrder(t *testing.T, f Factory) {
	const n = 4
	l := openLog(t, f(t, n))
	keys := keysCovering(n, 3)
	from := map[string]int{}
	var all []stream.Record
	for range 5 {
		all = append(all, appendAll(t, l, records(keys, 20, from))...)
	}
	g := newGroup(t)
	var mu sync.Mutex
	byKey := map[string][]string{}
	m := g.start(l, "a", false, func(_ int32, rs []stream.Record) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range rs {
			byKey[r.Key] = append(byKey[r.Key], string(r.Value))
		}
	})
	g.sig.waitFor(t, "every record delivered", func() bool { return g.delivered(all) })
	g.check(t, all, 1)
	mu.Lock()
	for _, k := range keys {
		for i, v := range byKey[k] {
			if want := fmt.Sprintf("%s#%d", k, i); v != want {
				t.Errorf("key %s: record %d is %q, want %q", k, i, v, want)
				break
			}
		}
	}
	mu.Unlock()
	if h := g.held(); len(h["a"]) != n {
		t.Errorf("the only member holds %v, want all %d partitions", h, n)
	}
	m.stop(t)
	if h := g.held(); len(h) != 0 {
		t.Errorf("after Consume returned, partitions still held: %v", h)
	}
}

// A restart resumes each partition after its last committed offset and
// delivers again what was not committed; offsets continue after a
// restart; Commit of a partition nobody holds is refused.
func testRestartResumesAfterCommit(t *testing.T, f Factory) {
	const n = 3
	open := f(t, n)
	l := open(t)
	keys := keysCovering(n, 2)
	from := map[string]int{}
	all := appendAll(t, l, records(keys, 10*len(keys), from))
	last := map[int32]int64{}
	for _, r := range all {
		last[r.Partition] = max(last[r.Partition], r.Offset)
	}

	g := newGroup(t)
	m := g.start(l, "first", false, nil)
	g.sig.waitFor(t, "every record delivered", func() bool { return g.delivered(all) })
	// Partition 0 is committed in the middle, partition 1 completely,
	// partition 2 not at all.
	commit := map[int32]int64{0: last[0] / 2, 1: last[1]}
	for p, off := range commit {
		if err := l.Commit(context.Background(), p, off); err != nil {
			t.Fatalf("commit partition %d offset %d: %v", p, off, err)
		}
	}
	m.stop(t)
	if err := l.Commit(context.Background(), 2, 0); !errors.Is(err, stream.ErrNotAssigned) {
		t.Errorf("commit of a partition no member holds: %v, want ErrNotAssigned", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	l = openLog(t, open)
	more := appendAll(t, l, records(keys, len(keys), from))
	for _, r := range more {
		if want := last[r.Partition] + 1; r.Offset != want {
			t.Errorf("after a restart, %s appended at offset %d of partition %d, want %d", show(r), r.Offset, r.Partition, want)
		}
		last[r.Partition] = r.Offset
	}
	var want []stream.Record
	for _, r := range append(all, more...) {
		if c, ok := commit[r.Partition]; !ok || r.Offset > c {
			want = append(want, r)
		}
	}
	g2 := newGroup(t)
	for p, off := range commit {
		g2.committed[p] = off
	}
	g2.start(l, "second", false, nil)
	g2.sig.waitFor(t, "the uncommitted records delivered again", func() bool { return g2.delivered(want) })
	g2.check(t, append(all, more...), 1)
	g2.mu.Lock()
	for p, c := range commit {
		for off := range g2.seen[p] {
			if off <= c {
				t.Errorf("partition %d: offset %d delivered after offset %d was committed", p, off, c)
			}
		}
	}
	g2.mu.Unlock()
}

// Two members split the partitions, no partition at both at once; when
// one stops, the other takes its partitions over from the committed
// offsets.
func testGroupSplitsAndHandsOver(t *testing.T, f Factory) {
	const n = 6
	l := openLog(t, f(t, n))
	keys := keysCovering(n, 2)
	from := map[string]int{}
	var all []stream.Record
	add := func() {
		all = append(all, appendAll(t, l, records(keys, 4*len(keys), from))...)
	}
	add()
	g := newGroup(t)
	g.start(l, "a", true, nil)
	g.sig.waitFor(t, "a holding every partition and every record delivered", func() bool {
		return g.holds(n, "a") && g.delivered(all)
	})

	b := g.start(l, "b", true, nil)
	g.sig.waitFor(t, "a and b splitting the partitions", func() bool { return g.holds(n, "a", "b") })
	add()
	g.sig.waitFor(t, "every record delivered to a or b", func() bool { return g.delivered(all) })

	b.stop(t)
	g.sig.waitFor(t, "a holding every partition again", func() bool { return g.holds(n, "a") })
	add()
	g.sig.waitFor(t, "every record delivered after b stopped", func() bool { return g.delivered(all) })
	g.check(t, all, 1)
}

// A partition's revocation waits for its in-flight batch: a member whose
// batch is held up while it leaves keeps the partition until the batch
// returns, and the other member then resumes after what it committed.
func testRevokeWaitsForInFlightBatch(t *testing.T, f Factory) {
	const n = 2
	l := openLog(t, f(t, n))
	keys := keysCovering(n, 1)
	from := map[string]int{}
	all := appendAll(t, l, records(keys, 4, from))
	g := newGroup(t)

	var (
		mu      sync.Mutex
		holdUp  bool
		entered = make(chan int32, 1)
		release = make(chan struct{})
	)
	a := g.start(l, "a", true, func(p int32, _ []stream.Record) {
		mu.Lock()
		h := holdUp
		holdUp = false
		mu.Unlock()
		if h {
			entered <- p
			<-release
		}
	})
	g.sig.waitFor(t, "a holding both partitions and every record delivered", func() bool {
		return g.holds(n, "a") && g.delivered(all)
	})
	g.start(l, "b", true, nil)
	mu.Lock()
	holdUp = true
	mu.Unlock()
	all = append(all, appendAll(t, l, records(keys, 4, from))...)
	p := <-entered

	a.cancel() // a leaves while its batch of p is in flight
	g.mu.Lock()
	if h := g.holder[p]; h != "a" {
		t.Errorf("partition %d held by %q while a's batch of it is in flight", p, h)
	}
	g.mu.Unlock()
	close(release)
	g.sig.waitFor(t, "b holding every partition", func() bool { return g.holds(n, "b") })
	all = append(all, appendAll(t, l, records(keys, 4, from))...)
	g.sig.waitFor(t, "every record delivered", func() bool { return g.delivered(all) })
	a.stop(t)
	g.check(t, all, 2)
}

// Appends from many goroutines at once all land: every partition's
// offsets are consecutive, and every record is delivered.
func testConcurrentAppendsLoseNothing(t *testing.T, f Factory) {
	const (
		n       = 4
		writers = 8
		appends = 25
	)
	l := openLog(t, f(t, n))
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		all []stream.Record
	)
	for w := range writers {
		wg.Go(func() {
			keys := []string{fmt.Sprintf("w%d-x", w), fmt.Sprintf("w%d-y", w)}
			from := map[string]int{}
			for i := range appends {
				rs := records(keys, 1+i%3, from)
				if err := l.Append(context.Background(), rs); err != nil {
					t.Errorf("writer %d: append: %v", w, err)
					return
				}
				mu.Lock()
				all = append(all, rs...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	count := map[int32]int64{}
	offsets := map[int32]map[int64]bool{}
	for _, r := range all {
		if offsets[r.Partition] == nil {
			offsets[r.Partition] = map[int64]bool{}
		}
		if offsets[r.Partition][r.Offset] {
			t.Errorf("partition %d: offset %d given to two records", r.Partition, r.Offset)
		}
		offsets[r.Partition][r.Offset] = true
		count[r.Partition]++
	}
	for p, offs := range offsets {
		for off := range offs {
			if off >= count[p] {
				t.Errorf("partition %d: offset %d past its %d records", p, off, count[p])
			}
		}
	}
	g := newGroup(t)
	var kmu sync.Mutex
	byKey := map[string][]string{}
	g.start(l, "a", false, func(_ int32, rs []stream.Record) {
		kmu.Lock()
		defer kmu.Unlock()
		for _, r := range rs {
			byKey[r.Key] = append(byKey[r.Key], string(r.Value))
		}
	})
	g.sig.waitFor(t, "every record delivered", func() bool { return g.delivered(all) })
	g.check(t, all, 1)
	kmu.Lock()
	defer kmu.Unlock()
	for k, vs := range byKey {
		for i, v := range vs {
			if want := fmt.Sprintf("%s#%d", k, i); v != want {
				t.Errorf("key %s: record %d is %q, want %q", k, i, v, want)
				break
			}
		}
	}
}
