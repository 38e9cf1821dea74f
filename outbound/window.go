package outbound

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// An account's queue holds at most queue_window messages in memory. What
// does not fit stays in the store, where every queued message is already
// stored, and is loaded a window at a time (store.ListQueue) whenever the
// queue falls to half the window. While anything waits there (spilled),
// new messages go to the store too, so that they are loaded behind it
// instead of passing it.
//
// A load keeps each recipient's messages in memory a prefix of its
// messages in sending order, which is what the queue's per-recipient FIFO
// needs:
//   - messages with a client_seq are loaded by client_seq, which is the
//     order the reorder buffer releases them in;
//   - the others by priority, then as stored. A message of a recipient
//     that has an older message of lower priority still in the store
//     brings that one along first (takePlain), so a P0 loaded ahead of
//     a P1 backlog never passes its recipient's older P1;
//   - a recipient holding an eighth of the window (windowShare) is loaded
//     no further this time: one recipient's long backlog, which its pair
//     limit drains slowly, does not fill the window while others wait.
//
// A recipient that moves to another account takes its messages in the
// store along (yieldRecipient); the other account loads them behind those
// that moved from memory (adoptStored).
//
// A message left in the store with a higher priority than one the queues
// hold is urgent: the next round loads at once, up to half a window beyond
// it, instead of waiting for the queues to fall to half, so it waits for
// no more than one load.
//
// Messages of unknown outcome are all loaded at start, before the window:
// each heads its recipient and was in flight at the stop.

// windowShare is the share of the window one recipient may hold, as a
// divisor: an eighth.
const windowShare = 8

// window is the account's part of its queue in the store. Owned by run.
type window struct {
	// spilled: the store may hold queued messages of the account that the
	// queues do not.
	spilled bool
	// stored estimates those messages per priority: counted at each
	// load, one added for each new message left in the store.
	stored [3]int
	// idleAt is q.left when a load found nothing it could load; the
	// next load waits until something has left the queues.
	idleAt  uint64
	idle    bool
	urgent  bool      // a message of a higher priority than one in the queues waits in the store
	retryAt time.Time // a failed load is tried again from then
}

// loadRetryDelay is the wait before a failed window load is tried again.
const loadRetryDelay = time.Second

// hold puts a message stored as queued in the queues, or leaves it in the
// store when the queues are full or other messages wait there.
func (w *worker) hold(it *item, now time.Time) {
	if w.q.has(it.msg.ID) {
		return
	}
	if w.win.spilled || w.q.len() >= w.d.settings.Current().QueueWindow {
		w.win.spilled = true
		w.win.stored[it.msg.Priority]++
		for p := it.msg.Priority + 1; p < 3; p++ {
			if w.q.depth[p] > 0 {
				w.win.urgent, w.win.idle = true, false
			}
		}
		return
	}
	w.q.push(it, now)
}

// refill loads the next window when the queues have fallen to half the
// window, or an urgent message waits, and messages wait in the store. It
// returns when to try again after a failure (zero: no need).
func (w *worker) refill() time.Time {
	size := w.d.settings.Current().QueueWindow
	if !w.win.spilled || (w.q.len() > size/2 && !w.win.urgent) || (w.win.idle && w.win.idleAt == w.q.left) {
		return time.Time{}
	}
	if w.win.urgent {
		size += size / 2
	}
	now := w.d.clock.Now()
	if now.Before(w.win.retryAt) {
		return w.win.retryAt
	}
	ctx, cancel := bg()
	defer cancel()
	if err := w.load(ctx, size); err != nil {
		w.d.log.Error("load queued messages from the store", "account_id", w.id, "err", err)
		w.win.retryAt = now.Add(loadRetryDelay)
		return w.win.retryAt
	}
	if w.snapshotAccount().State == wamux.AccountDisabled {
		// Recipients now wholly in memory may move.
		w.requestEvacuation()
	}
	return time.Time{}
}

// load fills the queues up to size from the store, in the order the
// package comment gives, and ends spilled when the store has no queued
// message left that the queues lack.
func (w *worker) load(ctx context.Context, size int) error {
	counts, err := w.d.store.CountQueued(ctx, w.id)
	if err != nil {
		return err
	}
	share := max(size/windowShare, 1)
	perTo := map[string]int{}
	var full []string
	for to, r := range w.q.byTo {
		if perTo[to] = len(r.msgs); perTo[to] >= share {
			full = append(full, to)
		}
	}
	want := max(size-w.q.len(), 0)
	limit := w.q.len() + want
	seqd, err := w.d.store.ListQueue(ctx, store.QueueFilter{AccountID: w.id, Sequenced: true, ExceptRecipients: full, Limit: limit})
	if err != nil {
		return err
	}
	plain, err := w.d.store.ListQueue(ctx, store.QueueFilter{AccountID: w.id, ExceptRecipients: full, Limit: limit})
	if err != nil {
		return err
	}
	complete := len(full) == 0 && len(seqd) < limit && len(plain) < limit
	l := loader{w: w, now: w.d.clock.Now(), share: share, perTo: perTo, blocked: map[string]bool{}}
	for p := range counts {
		for lower := p + 1; lower < len(counts); lower++ {
			l.olderLower[p] = l.olderLower[p] || counts[lower] > 0
		}
	}
	seqd, plain = w.notHeld(seqd), w.notHeld(plain)
	for l.loaded < want && (len(seqd) > 0 || len(plain) > 0) {
		if len(plain) == 0 || (len(seqd) > 0 && sendsBefore(seqd[0], plain[0])) {
			l.take(seqd[0])
			seqd = seqd[1:]
			continue
		}
		if err := l.takePlain(ctx, plain[0]); err != nil {
			return err
		}
		plain = plain[1:]
	}
	if len(seqd) > 0 || len(plain) > 0 || len(l.blocked) > 0 {
		complete = false
	}
	w.win.spilled, w.win.urgent = !complete, false
	w.win.idle, w.win.idleAt = l.loaded == 0, w.q.left
	w.win.stored = [3]int{}
	if w.win.spilled {
		inStore := w.queuedInMemory()
		for p := range counts {
			w.win.stored[p] = max(counts[p]-inStore[p], 0)
		}
	}
	return nil
}

// loader is one window load in progress.
type loader struct {
	w          *worker
	now        time.Time
	share      int
	perTo      map[string]int  // messages per recipient in the queues
	blocked    map[string]bool // recipients loaded no further this time
	olderLower [3]bool         // the store holds messages of a lower priority than this one
	loaded     int
}

// take queues one loaded message unless its recipient is blocked or
// reaches its share, which blocks it.
func (l *loader) take(m wamux.Message) {
	if l.blocked[m.To] || l.w.q.has(m.ID) {
		return
	}
	if l.perTo[m.To] >= l.share {
		l.blocked[m.To] = true
		return
	}
	l.perTo[m.To]++
	l.loaded++
	l.w.q.push(&item{msg: m, enqueued: m.CreatedAt, retries: m.Attempts}, l.now)
}

// takePlain queues a message without a client_seq after its recipient's
// older ones still in the store, which may have a lower priority; when
// they do not all fit the recipient's share, the oldest that do are
// loaded and the message waits for a later load.
func (l *loader) takePlain(ctx context.Context, m wamux.Message) error {
	if l.blocked[m.To] || !l.olderLower[m.Priority] {
		l.take(m)
		return nil
	}
	room := l.share - l.perTo[m.To]
	older, err := l.w.d.store.ListQueue(ctx, store.QueueFilter{AccountID: l.w.id, Recipient: m.To, Limit: l.perTo[m.To] + room + 1})
	if err != nil {
		return err
	}
	var before []wamux.Message
	found := false
	for _, o := range older {
		if o.ID == m.ID {
			found = true
			break
		}
		if o.ClientSeq == 0 && !l.w.q.has(o.ID) {
			before = append(before, o)
		}
	}
	for _, o := range before {
		l.take(o)
	}
	if found {
		l.take(m)
	}
	if !l.w.q.has(m.ID) {
		l.blocked[m.To] = true
	}
	return nil
}

// sendsBefore orders the heads of the two loaded lists: by priority, then
// by age.
func sendsBefore(a, b wamux.Message) bool {
	if a.Priority != b.Priority {
		return a.Priority < b.Priority
	}
	return a.CreatedAt.Before(b.CreatedAt)
}

// notHeld leaves out the messages the queues hold.
func (w *worker) notHeld(ms []wamux.Message) []wamux.Message {
	out := ms[:0]
	for _, m := range ms {
		if !w.q.has(m.ID) {
			out = append(out, m)
		}
	}
	return out
}

// queuedInMemory counts per priority the messages in the queues that the
// store has as queued: all but those of unknown outcome and those with
// the provider.
func (w *worker) queuedInMemory() [3]int {
	var out [3]int
	for _, r := range w.q.byTo {
		for i, it := range r.msgs {
			if it.state != itemQueued || (i == 0 && r.inflight) {
				continue
			}
			out[it.msg.Priority]++
		}
	}
	return out
}

// storedOf returns, oldest first, the queued messages of recipient to that
// the store holds and the queues do not: the recipient moves with them or
// not at all.
func (w *worker) storedOf(to string) ([]wamux.Message, error) {
	if !w.win.spilled {
		return nil, nil
	}
	ctx, cancel := bg()
	defer cancel()
	ms, err := w.d.store.ListQueue(ctx, store.QueueFilter{AccountID: w.id, Recipient: to, Limit: math.MaxInt32})
	if err != nil {
		return nil, fmt.Errorf("outbound: look for a recipient's messages in the store: %w", err)
	}
	return w.notHeld(ms), nil
}

// adoptStored notes messages moved here in the store alone: from now on
// new messages queue behind them there, and the next load finds them.
func (w *worker) adoptStored(n [3]int) {
	if n == ([3]int{}) {
		return
	}
	w.win.spilled, w.win.idle = true, false
	for p := range n {
		w.win.stored[p] += n[p]
	}
}

// rereadStore looks in the store for the account's messages that reached
// it without this worker: submitted through another node (which stores
// them and queues nothing), released by an operator there, moved here by
// another node's evacuation. Those waiting for their seq go through the
// reorder buffer, as if submitted here, except the ones it holds or
// released already (unstored); the queued ones are loaded by the window,
// which from now on takes its new messages behind them. A message found
// both here and in the inbox later is sent once: its status leaves queued
// with the first attempt, which the second cannot repeat (markSending).
func (w *worker) rereadStore() {
	ctx, cancel := bg()
	defer cancel()
	waiting, err := w.d.store.ListMessages(ctx, store.MessageFilter{AccountID: w.id, Statuses: []wamux.Status{wamux.StatusWaitingSeq}, Limit: math.MaxInt32})
	if err != nil {
		w.d.log.Error("look for messages submitted elsewhere", "account_id", w.id, "err", err)
		return
	}
	unstored := make(map[string]bool, len(w.unstored))
	for _, m := range w.unstored {
		unstored[m.ID] = true
	}
	var fresh []wamux.Message
	for _, m := range waiting {
		if !unstored[m.ID] && !w.buf.Waits(m.ClientSeq) {
			fresh = append(fresh, m)
		}
	}
	if len(fresh) > 0 {
		now := w.d.clock.Now()
		s := w.d.settings.Current()
		toQueue, held, seqChanged := w.sequence(fresh, now, s.Ordering)
		w.enqueue(w.persistSeq(toQueue, held, seqChanged), now, s.P2MaxDepth)
	}
	w.win.spilled, w.win.idle = true, false
}
