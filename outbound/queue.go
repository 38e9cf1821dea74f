package outbound

import (
	"container/heap"
	"time"

	"github.com/wamux/wamux"
)

// itemState is where a queued message stands between two attempts. The
// legal moves are the methods below; a message leaves every state when
// it is finished (accepted, failed, resolved, moved) and leaves the queue.
//
//	queued  --outcome unknown-->  unknown
//	unknown --no status found-->  resend
//	resend  --outcome unknown-->  unknown
//	resend  --refused (requeue)-> unknown
type itemState uint8

const (
	// itemQueued: stored queued (or waiting_seq); the next attempt sends it.
	itemQueued itemState = iota
	// itemUnknown: stored unknown; before anything else the compensator
	// looks for a status that resolves it.
	itemUnknown
	// itemResend: stored unknown; the compensator found no status, so the
	// next attempt resends the same msg_id and counts as a resend.
	itemResend
)

// stored is the status the store holds for a message in this state.
func (s itemState) stored() wamux.Status {
	if s == itemQueued {
		return wamux.StatusQueued
	}
	return wamux.StatusUnknown
}

// item is one message in an account queue.
type item struct {
	msg      wamux.Message
	enqueued time.Time
	state    itemState
	// retries counts attempts that count against max_attempts: certain
	// failures and unknown outcomes, not throttles (those are the
	// account's fault, not the message's). The message's stored attempts
	// keep the same count, so restore starts from it.
	retries int
	// resendCounted: the resend of the current unknown outcome is in
	// wamux_resends_total; one refused and decided again is not counted
	// again.
	resendCounted bool
	// compSince and compMark: when the compensator first looked at this
	// unknown outcome, and how many receipts had been received then.
	compSince time.Time
	compMark  int64
	// pairHits counts 131056 answers for this message in a row; the
	// recipient waits 4^pairHits seconds after the next one.
	pairHits int
	// counted: included in the worker's unknown-outcome count (owned by
	// the worker's run goroutine, like the count).
	counted bool
	// maybeSending: the last write marking it sending failed, perhaps
	// after committing; the next attempt accepts sending as its start.
	maybeSending bool
}

// outcomeUnknown: an attempt (first send or resend) got no answer that
// tells whether the provider has the message.
func (it *item) outcomeUnknown() {
	it.state, it.resendCounted = itemUnknown, false
}

// decideResend: the compensator found no status for an unknown outcome.
func (it *item) decideResend() {
	it.state = itemResend
	it.compSince, it.compMark = time.Time{}, 0
}

// resendRefused: the provider refused a resend (throttle, cooldown,
// disable) without taking it. The first send's outcome is as unknown as
// before, so the compensator decides again; the resend stays counted.
func (it *item) resendRefused() {
	it.state = itemUnknown
}

// recipient is the FIFO of one recipient's messages in one account. At most
// one of its messages is with the provider at a time, which is what keeps
// per-recipient order while other recipients proceed in parallel.
type recipient struct {
	to        string
	msgs      []*item
	inflight  bool
	notBefore time.Time
	heapIndex int // in the delayed heap, -1 when not there
}

func (r *recipient) head() *item { return r.msgs[0] }

func (r *recipient) pop() *item {
	it := r.msgs[0]
	r.msgs[0] = nil
	r.msgs = r.msgs[1:]
	return it
}

// queues schedules the recipients of one account: ready recipients in three
// FIFO lists by the priority of their head message, waiting ones in a heap
// by the time they may go again. Owned by the account's worker goroutine.
type queues struct {
	byTo    map[string]*recipient
	ready   [3][]*recipient
	delayed delayHeap
	depth   [3]int
	held    map[string]struct{} // msg_ids of the items in the queues
	// left counts the items that have left the queues, so that a window
	// load that found nothing is tried again only once something did.
	left uint64
	peak int // the most items held at once
}

func newQueues() *queues {
	return &queues{byTo: make(map[string]*recipient), held: make(map[string]struct{})}
}

// has reports whether a message is in the queues.
func (q *queues) has(msgID string) bool {
	_, ok := q.held[msgID]
	return ok
}

// len is how many messages the queues hold.
func (q *queues) len() int { return q.depth[0] + q.depth[1] + q.depth[2] }

// push appends a message to its recipient's FIFO; one already there is
// not added again.
func (q *queues) push(it *item, now time.Time) {
	if q.has(it.msg.ID) {
		return
	}
	q.held[it.msg.ID] = struct{}{}
	q.peak = max(q.peak, len(q.held))
	r, ok := q.byTo[it.msg.To]
	if !ok {
		r = &recipient{to: it.msg.To, heapIndex: -1}
		q.byTo[it.msg.To] = r
	}
	r.msgs = append(r.msgs, it)
	q.depth[it.msg.Priority]++
	if len(r.msgs) == 1 && !r.inflight && r.heapIndex < 0 {
		q.schedule(r, now)
	}
}

// schedule files a recipient that is not in flight: ready when its time
// has come, delayed otherwise, forgotten when it has nothing left.
func (q *queues) schedule(r *recipient, now time.Time) {
	if len(r.msgs) == 0 {
		delete(q.byTo, r.to)
		return
	}
	if r.notBefore.After(now) {
		heap.Push(&q.delayed, r)
		return
	}
	p := r.head().msg.Priority
	q.ready[p] = append(q.ready[p], r)
}

// promote moves recipients whose wait is over to the ready lists and
// returns when the next one will be due (zero when none waits).
func (q *queues) promote(now time.Time) time.Time {
	for len(q.delayed) > 0 {
		r := q.delayed[0]
		if r.notBefore.After(now) {
			return r.notBefore
		}
		heap.Pop(&q.delayed)
		q.schedule(r, now)
	}
	return time.Time{}
}

// popReady removes and returns the first ready recipient of priority p.
func (q *queues) popReady(p int) *recipient {
	r := q.ready[p][0]
	q.ready[p][0] = nil
	q.ready[p] = q.ready[p][1:]
	return r
}

func (q *queues) removed(it *item) {
	q.depth[it.msg.Priority]--
	delete(q.held, it.msg.ID)
	q.left++
}

// unfile takes a recipient that is not in flight out of the ready list of
// its head's priority, or out of the delayed heap, before its head changes
// other than by an attempt (its messages move to another account).
func (q *queues) unfile(r *recipient) {
	if r.heapIndex >= 0 {
		heap.Remove(&q.delayed, r.heapIndex)
		return
	}
	if len(r.msgs) > 0 {
		p := r.head().msg.Priority
		q.ready[p] = removeRecipient(q.ready[p], r)
	}
}

// delayHeap orders waiting recipients by notBefore.
type delayHeap []*recipient

func (h delayHeap) Len() int           { return len(h) }
func (h delayHeap) Less(i, j int) bool { return h[i].notBefore.Before(h[j].notBefore) }
func (h delayHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIndex, h[j].heapIndex = i, j
}
func (h *delayHeap) Push(x any) {
	r := x.(*recipient)
	r.heapIndex = len(*h)
	*h = append(*h, r)
}
func (h *delayHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	r.heapIndex = -1
	return r
}
