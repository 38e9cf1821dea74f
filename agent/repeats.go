package agent

import (
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/wamux/wamux"
)

type repeatKey struct {
	messageID string
	typ       wamux.ReceiptType
}

// claim is one Report of a key: done is closed once its append has
// finished, with err telling how.
type claim struct {
	done chan struct{}
	err  error
}

// repeats remembers the (message_id, type) pairs reported most recently,
// so that a source that repeats itself (a retrying webhook relay, a
// re-read log) costs neither a spool write nor a request. It is exact for
// the ids it holds and forgets the oldest; a forgotten id that comes again
// is sent again and the gateway deduplicates it.
type repeats struct {
	mu   sync.Mutex
	seen *simplelru.LRU[repeatKey, *claim]
}

func newRepeats(size int) (*repeats, error) {
	seen, err := simplelru.NewLRU[repeatKey, *claim](size, nil)
	if err != nil {
		return nil, err
	}
	return &repeats{seen: seen}, nil
}

// claim returns the claim already held for k, or records and returns a new
// one with fresh set. A hit counts as use, so a key repeated again and again
// stays remembered.
func (r *repeats) claim(k repeatKey) (c *claim, fresh bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.seen.Get(k); ok {
		return c, false
	}
	c = &claim{done: make(chan struct{})}
	r.seen.Add(k, c)
	return c, true
}

// done finishes c. A failed claim is forgotten first, so that a Report
// waiting on it, and any later one, tries the append itself.
func (r *repeats) done(k repeatKey, c *claim, err error) {
	if err != nil {
		r.mu.Lock()
		if cur, ok := r.seen.Peek(k); ok && cur == c {
			r.seen.Remove(k)
		}
		r.mu.Unlock()
	}
	c.err = err
	close(c.done)
}

// forget drops k, so that the next report of it is spooled again.
func (r *repeats) forget(k repeatKey) {
	r.mu.Lock()
	if c, ok := r.seen.Peek(k); ok {
		select {
		case <-c.done: // a pending claim belongs to a new report: keep it
			r.seen.Remove(k)
		default:
		}
	}
	r.mu.Unlock()
}

// markDone records k as reported without an append: used for the records
// found unacknowledged in the spool at start.
func (r *repeats) markDone(k repeatKey) {
	c := &claim{done: make(chan struct{})}
	close(c.done)
	r.mu.Lock()
	r.seen.Add(k, c)
	r.mu.Unlock()
}
