package streamtest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux/stream"
)

// within bounds every wait of the suite; a passing backend is far faster.
const within = 20 * time.Second

// signal wakes waiters whenever the state they watch may have changed.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func newSignal() *signal { return &signal{ch: make(chan struct{})} }

func (s *signal) poke() {
	s.mu.Lock()
	close(s.ch)
	s.ch = make(chan struct{})
	s.mu.Unlock()
}

func (s *signal) current() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

// waitFor returns once cond holds, checking it after every poke; it fails
// t if within passes first.
func (s *signal) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		ch := s.current()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
	}
}

// group watches the members of one consumer group: which member holds
// each partition, which batches are in flight and what was committed, and
// reports every breach of the Handler contract.
type group struct {
	t   *testing.T
	sig *signal

	mu        sync.Mutex
	holder    map[int32]string
	inBatch   map[int32]string
	committed map[int32]int64 // last committed offset; absent: none
	// expect is where a partition's next batch must start: after the
	// committed offset when it was assigned, then after the last batch.
	expect map[int32]int64
	// unsure is an offset whose Commit failed, which may have landed all
	// the same: a partition assigned later may also resume after it.
	unsure map[int32]int64
	alt    map[int32]int64 // where the next batch may start instead of expect
	// seen counts every delivery of each record, by partition and offset.
	seen map[int32]map[int64]int
	recs map[int32]map[int64]stream.Record
}

func newGroup(t *testing.T) *group {
	return &group{
		t: t, sig: newSignal(),
		holder: map[int32]string{}, inBatch: map[int32]string{},
		committed: map[int32]int64{}, expect: map[int32]int64{},
		unsure: map[int32]int64{}, alt: map[int32]int64{},
		seen: map[int32]map[int64]int{}, recs: map[int32]map[int64]stream.Record{},
	}
}

// member is one running Consume call.
type member struct {
	name   string
	g      *group
	log    stream.Log
	cancel context.CancelFunc
	done   chan error
	// commitEach commits every batch's last offset before it returns.
	commitEach bool
	// gate, when set, runs before a batch is recorded.
	gate func(p int32, rs []stream.Record)
}

// start runs a Consume of log as member name.
func (g *group) start(log stream.Log, name string, commitEach bool, gate func(int32, []stream.Record)) *member {
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{name: name, g: g, log: log, cancel: cancel, done: make(chan error, 1), commitEach: commitEach, gate: gate}
	go func() {
		m.done <- log.Consume(ctx, stream.Funcs{OnAssigned: m.assigned, OnRevoked: m.revoked, OnBatch: m.batch})
		g.sig.poke()
	}()
	g.t.Cleanup(func() { m.stop(g.t) })
	return m
}

// stop ends the member's Consume and waits for it; it fails t unless
// Consume returned nil.
func (m *member) stop(t *testing.T) {
	t.Helper()
	m.cancel()
	select {
	case err, ok := <-m.done:
		if ok {
			close(m.done)
			if err != nil {
				t.Errorf("%s: Consume after its context ended: %v", m.name, err)
			}
		}
	case <-time.After(within):
		t.Fatalf("%s: Consume did not return within %s of its context ending", m.name, within)
	}
}

func (m *member) assigned(_ context.Context, ps []int32) {
	g := m.g
	g.mu.Lock()
	for _, p := range ps {
		if h, ok := g.holder[p]; ok {
			g.t.Errorf("partition %d assigned to %s while %s holds it", p, m.name, h)
		}
		g.holder[p] = m.name
		if c, ok := g.committed[p]; ok {
			g.expect[p] = c + 1
		} else {
			g.expect[p] = 0
		}
		g.alt[p] = g.expect[p]
		if u, ok := g.unsure[p]; ok {
			g.alt[p] = u + 1
		}
	}
	g.mu.Unlock()
	g.sig.poke()
}

func (m *member) revoked(_ context.Context, ps []int32) {
	g := m.g
	g.mu.Lock()
	for _, p := range ps {
		if h := g.holder[p]; h != m.name {
			g.t.Errorf("partition %d revoked from %s, but %q holds it", p, m.name, h)
		}
		if b, ok := g.inBatch[p]; ok {
			g.t.Errorf("partition %d revoked from %s while a batch of %s is in flight", p, m.name, b)
		}
		delete(g.holder, p)
	}
	g.mu.Unlock()
	g.sig.poke()
}

func (m *member) batch(ctx context.Context, p int32, rs []stream.Record) error {
	g := m.g
	g.mu.Lock()
	if h := g.holder[p]; h != m.name {
		g.t.Errorf("batch of partition %d delivered to %s, but %q holds it", p, m.name, h)
	}
	if b, ok := g.inBatch[p]; ok {
		g.t.Errorf("batch of partition %d delivered to %s while a batch of %s is in flight", p, m.name, b)
	}
	g.inBatch[p] = m.name
	if len(rs) == 0 {
		g.t.Errorf("empty batch of partition %d delivered to %s", p, m.name)
	} else if rs[0].Offset != g.expect[p] && rs[0].Offset != g.alt[p] {
		g.t.Errorf("%s: batch of partition %d starts at offset %d, want %d", m.name, p, rs[0].Offset, g.expect[p])
	}
	g.mu.Unlock()

	if m.gate != nil {
		m.gate(p, rs)
	}

	var err error
	if m.commitEach && len(rs) > 0 {
		last := rs[len(rs)-1].Offset
		if err = m.log.Commit(ctx, p, last); err == nil {
			g.mu.Lock()
			g.committed[p] = last
			delete(g.unsure, p)
			g.mu.Unlock()
		} else {
			if ctx.Err() == nil {
				g.t.Errorf("%s: commit partition %d offset %d: %v", m.name, p, last, err)
			}
			g.mu.Lock()
			g.unsure[p] = last
			g.mu.Unlock()
		}
	}
	g.mu.Lock()
	for i, r := range rs {
		if r.Partition != p {
			g.t.Errorf("record of partition %d in a batch of partition %d", r.Partition, p)
		}
		if i > 0 && r.Offset != rs[i-1].Offset+1 {
			g.t.Errorf("partition %d: offset %d follows %d in one batch", p, r.Offset, rs[i-1].Offset)
		}
		if g.seen[p] == nil {
			g.seen[p] = map[int64]int{}
			g.recs[p] = map[int64]stream.Record{}
		}
		g.seen[p][r.Offset]++
		g.recs[p][r.Offset] = r
	}
	if len(rs) > 0 {
		g.expect[p] = rs[len(rs)-1].Offset + 1
		g.alt[p] = g.expect[p]
	}

	delete(g.inBatch, p)
	g.mu.Unlock()
	g.sig.poke()
	return err
}

// held returns the partitions each member holds.
func (g *group) held() map[string][]int32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string][]int32{}
	for p, h := range g.holder {
		out[h] = append(out[h], p)
	}
	for _, ps := range out {
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	}
	return out
}

// holds reports whether the members named, and only they, hold all n
// partitions.
func (g *group) holds(n int, names ...string) bool {
	h := g.held()
	total := 0
	for _, name := range names {
		if len(h[name]) == 0 {
			return false
		}
		total += len(h[name])
	}
	return total == n && len(h) == len(names)
}

// delivered reports whether every record of want was delivered.
func (g *group) delivered(want []stream.Record) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range want {
		if g.seen[r.Partition][r.Offset] == 0 {
			return false
		}
	}
	return true
}

// check compares every delivered record with what was appended and
// fails t for one delivered that was never appended or delivered more
// often than allowed.
func (g *group) check(t *testing.T, appended []stream.Record, maxDeliveries int) {
	t.Helper()
	byPos := map[[2]int64]stream.Record{}
	for _, r := range appended {
		byPos[[2]int64{int64(r.Partition), r.Offset}] = r
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for p, offs := range g.recs {
		for off, got := range offs {
			want, ok := byPos[[2]int64{int64(p), off}]
			switch {
			case !ok:
				t.Errorf("delivered partition %d offset %d, never appended", p, off)
			case got.Key != want.Key || string(got.Value) != string(want.Value):
				t.Errorf("partition %d offset %d: delivered %s, appended %s", p, off, show(got), show(want))
			}
			if n := g.seen[p][off]; n > maxDeliveries {
				t.Errorf("partition %d offset %d delivered %d times, want at most %d", p, off, n, maxDeliveries)
			}
		}
	}
}

func show(r stream.Record) string { return fmt.Sprintf("%s=%q", r.Key, r.Value) }
