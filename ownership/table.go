package ownership

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/wamux/wamux"
)

// errClosed answers Assign after Close.
var errClosed = errors.New("ownership: closed")

// table is the leases of a node and the delivery of their changes, which
// both implementations share. Lease reads an immutable slice (epoch per
// partition, 0 when not held) that every change replaces, so the send
// path takes no lock. Changes are queued in the order they were made, under
// mu, and delivered by one goroutine (run): a change made by a sender that
// was refused (Fenced) is delivered without that sender waiting for the
// watchers, which may be waiting for it.
type table struct {
	n      int
	epochs atomic.Pointer[[]int64]

	mu       sync.Mutex
	queue    []item
	watchers []*watcher
	closing  bool
	wake     chan struct{} // a token when the queue grew or Close began
	done     chan struct{} // closed when run returned
}

// item is one queued delivery: a change for every watcher, or the held
// partitions for a new watcher (join) before it gets the changes after.
type item struct {
	change    Change
	join      *watcher
	delivered chan struct{} // closed once delivered
}

type watcher struct {
	fn      func(Change)
	stopped atomic.Bool
}

func newTable(n int) *table {
	t := &table{n: n, wake: make(chan struct{}, 1), done: make(chan struct{})}
	none := make([]int64, n)
	t.epochs.Store(&none)
	go t.run()
	return t
}

func (t *table) Partitions() int { return t.n }

func (t *table) Lease(accountID string) (Lease, bool) {
	p := wamux.PartitionOf(accountID, t.n)
	e := (*t.epochs.Load())[p]
	return Lease{Partition: p, Epoch: e}, e != 0
}

// Held returns the leases held now, by partition.
func (t *table) Held() []Lease {
	return held(*t.epochs.Load())
}

func held(epochs []int64) []Lease {
	var out []Lease
	for p, e := range epochs {
		if e != 0 {
			out = append(out, Lease{Partition: p, Epoch: e})
		}
	}
	return out
}

func (t *table) Watch(fn func(Change)) (stop func()) {
	w := &watcher{fn: fn}
	t.mu.Lock()
	t.enqueue(item{change: Change{Assigned: t.Held()}, join: w})
	t.mu.Unlock()
	return func() {
		w.stopped.Store(true)
		t.mu.Lock()
		defer t.mu.Unlock()
		for i, o := range t.watchers {
			if o == w {
				t.watchers = append(t.watchers[:i:i], t.watchers[i+1:]...)
				break
			}
		}
	}
}

func (t *table) Fenced(l Lease) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l.Partition < 0 || l.Partition >= t.n || (*t.epochs.Load())[l.Partition] != l.Epoch || l.Epoch == 0 {
		return
	}
	t.change(nil, []int{l.Partition})
}

// isHeld reports whether partition p is held now.
func (t *table) isHeld(p int) bool { return (*t.epochs.Load())[p] != 0 }

// change holds assigned and drops the partitions in revoked that are
// held, and queues the change; t.mu is held. The returned channel is
// closed once watchers have been told.
func (t *table) change(assigned []Lease, revoked []int) <-chan struct{} {
	epochs := slices.Clone(*t.epochs.Load())
	var c Change
	for _, p := range revoked {
		if epochs[p] != 0 {
			c.Revoked = append(c.Revoked, Lease{Partition: p, Epoch: epochs[p]})
			epochs[p] = 0
		}
	}
	for _, l := range assigned {
		epochs[l.Partition] = l.Epoch
		c.Assigned = append(c.Assigned, l)
	}
	t.epochs.Store(&epochs)
	if len(c.Assigned) == 0 && len(c.Revoked) == 0 {
		return closedChan
	}
	return t.enqueue(item{change: c})
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// enqueue queues it for run; t.mu is held. After Close nothing is
// delivered any more.
func (t *table) enqueue(it item) <-chan struct{} {
	if t.closing {
		return closedChan
	}
	it.delivered = make(chan struct{})
	t.queue = append(t.queue, it)
	select {
	case t.wake <- struct{}{}:
	default:
	}
	return it.delivered
}

// run delivers the queue in order until Close, and what is queued by
// then.
func (t *table) run() {
	defer close(t.done)
	for {
		t.mu.Lock()
		if len(t.queue) == 0 {
			closing := t.closing
			t.mu.Unlock()
			if closing {
				return
			}
			<-t.wake
			continue
		}
		it := t.queue[0]
		t.queue = t.queue[1:]
		watchers := t.watchers
		t.mu.Unlock()
		if it.join != nil {
			t.join(it)
		} else {
			for _, w := range watchers {
				if !w.stopped.Load() {
					w.fn(it.change)
				}
			}
		}
		close(it.delivered)
	}
}

// join tells a new watcher the partitions held when it was queued, and
// then makes it one of the watchers of the changes queued after it.
func (t *table) join(it item) {
	w := it.join
	if len(it.change.Assigned) > 0 && !w.stopped.Load() {
		w.fn(it.change)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !w.stopped.Load() {
		t.watchers = append(t.watchers[:len(t.watchers):len(t.watchers)], w)
	}
}

// close delivers what is queued and stops run.
func (t *table) close() {
	t.mu.Lock()
	t.closing = true
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
	<-t.done
}
