package outbound

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/ownership"
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/sequence"
	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/store"
)

// storeTimeout bounds one store call made by a worker.
const storeTimeout = 30 * time.Second

// worker sends for one account. One goroutine (run) owns the queues and
// the reorder buffer; provider calls run in their own goroutines and report
// back on done, so a slow provider never stalls scheduling.
type worker struct {
	d  *Dispatcher
	id string

	// lease is the account's lease this worker works under, and
	// leaseFence its fence, shared by every message update the worker
	// writes (zero and nil without an Ownership). A worker never outlives
	// its lease: a revoke stops it, and a later assignment starts another.
	lease      ownership.Lease
	leaseFence *store.Fence
	// revoked: the lease was revoked, or the store refused it; the
	// worker takes no new work. abandoned: the drain after the revoke
	// ran out of time; nothing more is written under the lease, and
	// what is still with the provider stays sending for the next
	// holder's compensation.
	revoked   atomic.Bool
	abandoned atomic.Bool
	cancel    context.CancelFunc // stops run and the evacuator
	// reload asks run to look in the store for messages that reached
	// it without this worker (rereadStore).
	reload atomic.Bool

	// Lock order: see Dispatcher.routeMu (mu comes after the
	// Dispatcher's locks; cooldownMu is taken with no other held).
	mu        sync.Mutex // guards the fields below, shared with API calls
	account   wamux.Account
	inbox     []wamux.Message // admitted, not yet sequenced
	released  []wamux.Message // released by an operator: straight to the queue
	adopted   []*item         // moved here with their recipient: ahead of the inbox
	depthSnap [3]int          // queued per priority, in memory and in the store
	storeSnap int             // of depthSnap, those only in the store
	peakSnap  int             // the most messages the queues have held at once

	// adoptedStored counts per priority messages moved here in the store
	// alone: the window loads them.
	adoptedStored [3]int
	// intaking, waitingSnap and unstoredSnap count, for admission, the
	// messages intake took from the inbox before depthSnap shows them,
	// those in the reorder buffer and those released by a sequencing
	// step not yet stored, at the last scheduling round. nextSeqSnap is
	// the buffer's NextSeq then: NextSeq only grows, so it is a lower
	// bound of the one a message submitted now meets.
	intaking     int
	waitingSnap  int
	unstoredSnap int
	nextSeqSnap  int64

	wake chan struct{}

	done     chan completion
	handoffs chan handoff       // a recipient moving to another account (routing)
	scans    chan chan []string // which recipients could move (evacuate)
	evac     chan struct{}      // wakes the evacuator
	exited   chan struct{}      // closed when run returns

	// cooldownMu orders the account's cooldown writes to the store
	// (storeCooldown) and an operator's end of its cooldown
	// (Dispatcher.endCooldown), store writes included.
	cooldownMu sync.Mutex

	// owned by run
	q        *queues
	win      window
	buf      *sequence.Buffer[wamux.Message]
	inflight int
	// latency times the provider calls, for maxInflight.
	latency callLatency
	// calls mirrors inflight for readers outside run (tests): attempts
	// launched and not yet completed.
	calls    atomic.Int32
	stopping bool
	unknownN int // items whose last outcome is unknown (wamux_unknown_outcomes)
	// seqDirty: the last sequencing step's write failed, so the stored
	// sequence state is behind the buffer's; unsaved are the status
	// changes of the failed steps, written again, before the new ones,
	// with the next step or by retrySeq from seqRetryAt on. unstored are
	// the messages those steps released, in release order: they reach
	// the queue only once the write has succeeded (see persistSeq).
	seqDirty   bool
	unsaved    []store.MessageUpdate
	unstored   []wamux.Message
	seqRetryAt time.Time

	// restoredTos lists the recipients of the routed messages restore
	// found, for Start's repairOwners (set before run starts).
	restoredTos []string
}

// action is what the loop does with a recipient after an attempt.
type action int

const (
	actDone  action = iota // the head message is finished (accepted, failed, resolved)
	actRetry               // keep the head; try again after delay
)

type completion struct {
	r     *recipient
	it    *item
	act   action
	delay time.Duration
}

func newWorker(d *Dispatcher, a wamux.Account, lease ownership.Lease) *worker {
	w := &worker{
		d:        d,
		id:       a.ID,
		account:  a,
		wake:     make(chan struct{}, 1),
		done:     make(chan completion, d.maxIn),
		handoffs: make(chan handoff),
		scans:    make(chan chan []string),
		evac:     make(chan struct{}, 1),
		exited:   make(chan struct{}),
		q:        newQueues(),
		buf:      sequence.NewBuffer[wamux.Message](a.ID, sequence.DefaultMaxSkipped),
		// NextSeq of a fresh buffer; restore publishes the stored one.
		nextSeqSnap: 1,
	}
	if d.own != nil {
		w.lease, w.leaseFence = lease, lease.Fence()
	}
	return w
}

func (w *worker) kick() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *worker) setAccount(a wamux.Account) {
	w.mu.Lock()
	w.account = a
	w.mu.Unlock()
	w.kick()
	if a.State == wamux.AccountDisabled {
		w.requestEvacuation()
	}
}

func (w *worker) snapshotAccount() wamux.Account {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.account
}

func (w *worker) depth() [3]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.depthSnap
}

// backlog is how many messages the account has to send before one routed
// to it now: those queued at the last scheduling round and those handed
// to it since. Messages moved here (adopted) are left out: the evacuation
// that moves them counts them as planned.
func (w *worker) backlog() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.depthSnap[0] + w.depthSnap[1] + w.depthSnap[2] + len(w.inbox) + len(w.released)
}

// admissionLoad is what admission counts against the account's bounds.
func (w *worker) admissionLoad() accountLoad {
	w.mu.Lock()
	defer w.mu.Unlock()
	queued := w.depthSnap[0] + w.depthSnap[1] + w.depthSnap[2] + len(w.inbox) + len(w.released) + w.intaking + w.unstoredSnap
	return accountLoad{
		queued:   queued,
		waiting:  w.waitingSnap,
		resident: queued + w.waitingSnap - w.storeSnap,
		nextSeq:  w.nextSeqSnap,
	}
}

func (w *worker) submit(m wamux.Message) {
	w.mu.Lock()
	w.inbox = append(w.inbox, m)
	w.mu.Unlock()
	w.kick()
	if w.snapshotAccount().State == wamux.AccountDisabled {
		// Routed here while no other account could take it (route keeps
		// a disabled owner then): the evacuator moves it once one can,
		// and only a wake makes it look at a recipient it has not seen.
		w.requestEvacuation()
	}
}

func (w *worker) enqueueReleased(ms []wamux.Message) {
	w.mu.Lock()
	w.released = append(w.released, ms...)
	w.mu.Unlock()
	w.kick()
}

func bg() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), storeTimeout)
}

// restore rebuilds the account's reorder buffer from the store, queues
// every message of unknown outcome and loads the first window of queued
// messages (see window.go).
func (w *worker) restore(ctx context.Context) error {
	// What restoreSeq releases it stores as queued, where the load finds
	// it; what it could not store waits in unstored for its write.
	if _, err := w.restoreSeq(ctx); err != nil {
		return err
	}
	unknown, err := w.d.store.ListMessages(ctx, store.MessageFilter{AccountID: w.id, Statuses: []wamux.Status{wamux.StatusUnknown}, Limit: 1 << 30})
	if err != nil {
		return err
	}
	sortForQueue(unknown)
	w.queueRestored(unknown)
	w.win.spilled = true
	if err := w.load(ctx, w.d.settings.Current().QueueWindow); err != nil {
		return err
	}
	seen := map[string]bool{}
	for to, r := range w.q.byTo {
		for _, it := range r.msgs {
			if admit.Routed(it.msg) && !seen[to] {
				seen[to] = true
				w.restoredTos = append(w.restoredTos, to)
			}
		}
	}
	w.publishDepth()
	return nil
}

// restoreSeq rebuilds the reorder buffer from the stored sequence state
// and the waiting messages, and returns the messages it released.
func (w *worker) restoreSeq(ctx context.Context) ([]wamux.Message, error) {
	st := w.d.store
	seq, err := st.GetSeq(ctx, w.id)
	if err != nil {
		return nil, err
	}
	waiting, err := st.ListMessages(ctx, store.MessageFilter{AccountID: w.id, Statuses: []wamux.Status{wamux.StatusWaitingSeq}, Limit: 1 << 30})
	if err != nil {
		return nil, err
	}
	pending := make([]sequence.Pending[wamux.Message], 0, len(waiting))
	for _, m := range waiting {
		pending = append(pending, sequence.Pending[wamux.Message]{Seq: m.ClientSeq, Item: m, Since: m.CreatedAt})
	}
	buf, restored, err := sequence.RestoreBuffer(seq, pending, sequence.DefaultMaxSkipped)
	if err != nil {
		return nil, err
	}
	w.buf = buf
	var releasedNow []wamux.Message
	for _, e := range restored.Released {
		releasedNow = append(releasedNow, e.Item)
	}
	var held []wamux.Message
	for _, r := range restored.Rejected {
		// A waiting message below NextSeq: its seq was skipped before the
		// restart (the store's unique (account, seq) rules out a release).
		held = append(held, r.Item)
	}
	return w.persistSeq(releasedNow, held, len(restored.Released) > 0), nil
}

// queueRestored queues recovered messages in their order. The stored
// attempts are those that count against max_attempts (requeue gives a
// throttle's back): the count and the backoff go on from there. A message
// of unknown outcome gives the provider's statuses the quiet period to
// resolve it before the compensator looks.
func (w *worker) queueRestored(queued []wamux.Message) {
	now := w.d.clock.Now()
	quiet := w.d.settings.Current().QuietPeriod
	for _, m := range queued {
		it := &item{msg: m, enqueued: m.CreatedAt, retries: m.Attempts}
		if m.Status == wamux.StatusUnknown {
			it.state, it.counted = itemUnknown, true
			w.unknownN++
		}
		w.q.push(it, now)
		if it.state != itemUnknown {
			continue
		}
		r := w.q.byTo[m.To]
		if r.heapIndex < 0 && len(r.msgs) == 1 {
			w.q.ready[m.Priority] = removeRecipient(w.q.ready[m.Priority], r)
			r.notBefore = now.Add(quiet)
			w.q.schedule(r, now)
		}
	}
}

func removeRecipient(list []*recipient, r *recipient) []*recipient {
	for i, x := range list {
		if x == r {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

func (w *worker) run(ctx context.Context) {
	defer w.d.wg.Done()
	defer close(w.exited)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	stop := ctx.Done()
	for {
		if ctx.Err() != nil {
			w.stopping, stop = true, nil
		}
		if w.stopping && w.inflight == 0 {
			w.retrySeq(true)
			if w.revoked.Load() {
				w.d.forgetWorker(w)
			}
			return
		}
		var next time.Time
		if !w.stopping {
			// A failed step written now puts its messages in the
			// queue before this round's dispatch.
			w.retrySeq(false)
			w.intake()
			if w.reload.Swap(false) {
				w.rereadStore()
			}
			next = earliest(w.refill(), w.expire())
			next = earliest(next, w.dispatch())
			next = earliest(next, w.seqRetryDue())
		}
		// The state gauge changes when a cooldown ends, with nothing
		// queued too.
		next = earliest(next, w.publishDepth())
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(w.d.clock.Now()), 0)
		}
		timer.Reset(wait)
		select {
		case <-stop:
		case c := <-w.done:
			w.complete(c)
		case h := <-w.handoffs:
			h.reply <- w.yieldRecipient(h.to, h.dest)
		case reply := <-w.scans:
			reply <- w.scanMovable()
		case <-w.wake:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero():
		return a
	case a.Before(b):
		return a
	}
	return b
}

// publishDepth sets the account's gauges and returns when the cooldown
// it shows ends (zero: none is running).
func (w *worker) publishDepth() time.Time {
	var depth [3]int
	stored := 0
	for p := range depth {
		depth[p] = w.q.depth[p] + w.win.stored[p]
		stored += w.win.stored[p]
	}
	w.mu.Lock()
	w.depthSnap, w.storeSnap, w.peakSnap = depth, stored, w.q.peak
	w.intaking, w.waitingSnap, w.unstoredSnap = 0, w.buf.Len(), len(w.unstored)
	w.nextSeqSnap = w.buf.State().NextSeq
	w.mu.Unlock()
	m := w.d.metrics
	for p := 0; p < 3; p++ {
		m.queueDepth.WithLabelValues(w.id, wamux.Priority(p).String()).Set(float64(depth[p]))
	}
	// A message released while its step could not be stored (unstored)
	// is still waiting_seq in the store and goes nowhere until the write
	// succeeds: it counts as waiting.
	m.seqWaiting.WithLabelValues(w.id).Set(float64(w.buf.Len() + len(w.unstored)))
	m.unknownOutcomes.WithLabelValues(w.id).Set(float64(w.unknownN))
	state := w.snapshotAccount().State
	var until time.Time
	if state == wamux.AccountActive {
		if u := w.d.limiter.Limit(w.id).CooldownUntil; u.After(w.d.clock.Now()) {
			state, until = wamux.AccountCooldown, u
		}
	}
	for _, st := range []wamux.AccountState{wamux.AccountActive, wamux.AccountCooldown, wamux.AccountDisabled} {
		v := 0.0
		if st == state {
			v = 1
		}
		m.accountState.WithLabelValues(w.id, string(st)).Set(v)
	}
	return until
}

// intake takes new messages from the inbox through the reorder buffer into
// the queues. Status changes are stored before the sequence state, so after
// a crash the stored NextSeq never runs ahead of the stored statuses.
func (w *worker) intake() {
	w.mu.Lock()
	inbox, released, adopted, adoptedStored := w.inbox, w.released, w.adopted, w.adoptedStored
	w.inbox, w.released, w.adopted, w.adoptedStored = nil, nil, nil, [3]int{}
	w.intaking = len(inbox) + len(released)
	w.mu.Unlock()
	w.adoptStored(adoptedStored)
	if len(inbox) == 0 && len(released) == 0 && len(adopted) == 0 {
		return
	}
	now := w.d.clock.Now()
	// A moved recipient's messages were submitted before anything of it
	// in the inbox: the routing that moved them sends newer ones here.
	for _, it := range adopted {
		w.q.push(it, now)
	}
	s := w.d.settings.Current()
	if !s.Ordering {
		// What waited goes out before what arrives now.
		w.flushWaiting(s)
	}
	toQueue, held, seqChanged := w.sequence(inbox, now, s.Ordering)
	ready := w.persistSeq(toQueue, held, seqChanged)
	w.enqueue(append(ready, released...), now, s.P2MaxDepth)
}

// sequence takes new messages through the reorder buffer: toQueue are
// those that may go out now, in order, held those whose seq came too late;
// seqChanged says the buffer's state moved. With ordering off, a message
// passes at once and the buffer only learns its seq.
func (w *worker) sequence(inbox []wamux.Message, now time.Time, ordering bool) (toQueue, held []wamux.Message, seqChanged bool) {
	for _, m := range inbox {
		if m.ClientSeq == 0 {
			toQueue = append(toQueue, m)
			continue
		}
		if !ordering {
			// The buffer learns the seq, or once ordering is on again
			// the next seq would wait the gap timeout for this one.
			passed, err := w.buf.Pass(now, m.ClientSeq)
			if err != nil {
				w.d.log.Error("reorder buffer refused a passing message", "account_id", w.id, "msg_id", m.ID, "err", err)
			}
			seqChanged = seqChanged || passed
			toQueue = append(toQueue, m)
			continue
		}
		res, err := w.buf.Offer(now, m.ClientSeq, m)
		if err != nil {
			w.d.log.Error("reorder buffer refused a message", "account_id", w.id, "msg_id", m.ID, "err", err)
			continue
		}
		seqChanged = true
		switch res.Outcome {
		case sequence.Released:
			for _, e := range res.Released {
				w.d.metrics.seqWait.Observe(now.Sub(e.Item.CreatedAt).Seconds())
				toQueue = append(toQueue, e.Item)
			}
		case sequence.Held, sequence.Late:
			held = append(held, m)
		}
	}
	return toQueue, held, seqChanged
}

// expire skips gaps older than gap_timeout and returns when the next one
// will be due.
func (w *worker) expire() time.Time {
	s := w.d.settings.Current()
	if !s.Ordering {
		w.flushWaiting(s)
		return time.Time{}
	}
	ex := w.buf.Expire(w.d.clock.Now(), s.GapTimeout)
	w.applyExpired(ex, s)
	next, ok := w.buf.NextDeadline(s.GapTimeout)
	if !ok {
		return time.Time{}
	}
	return next
}

// flushWaiting releases everything the reorder buffer holds: ordering is
// switched off.
func (w *worker) flushWaiting(s settings.Values) {
	if w.buf.Len() == 0 {
		return
	}
	ex := w.buf.Expire(w.d.clock.Now().Add(s.GapTimeout+time.Hour), s.GapTimeout)
	w.applyExpired(ex, s)
}

func (w *worker) applyExpired(ex sequence.Expired[wamux.Message], s settings.Values) {
	if len(ex.Released) == 0 && len(ex.Skipped) == 0 {
		return
	}
	now := w.d.clock.Now()
	var skipped int64
	for _, r := range ex.Skipped {
		skipped += r.Len()
		w.d.log.Warn("client_seq gap skipped after gap_timeout", "account_id", w.id, "from", r.From, "to", r.To, "gap_timeout", s.GapTimeout)
	}
	w.d.metrics.gapsSkipped.WithLabelValues(w.id).Add(float64(skipped))
	var toQueue []wamux.Message
	for _, e := range ex.Released {
		w.d.metrics.seqWait.Observe(now.Sub(e.Item.CreatedAt).Seconds())
		toQueue = append(toQueue, e.Item)
	}
	w.enqueue(w.persistSeq(toQueue, nil, true), now, s.P2MaxDepth)
}

// seqRetryDelay is the wait before a failed sequencing step is written
// again when no new step comes first.
const seqRetryDelay = time.Second

// persistSeq stores released messages as queued, late ones as held, and
// the account's sequence state, in one transaction, and returns the
// messages that may go to the queue now.
//
// A message the step released goes to the queue only once the step is
// stored: the store is what a restart begins from, and it must never be
// behind what was sent (a restart would wait for sent seqs as a gap, or
// release a held one after the seq that skipped it). A failed write keeps
// its messages in unstored and is made again (retrySeq, or with the next
// step); they go to the queue, in release order, with the first write that
// succeeds. Messages without a client_seq take no part and go at once.
func (w *worker) persistSeq(queued, held []wamux.Message, seqChanged bool) []wamux.Message {
	var updates []store.MessageUpdate
	waiting := []wamux.Status{wamux.StatusWaitingSeq}
	for _, m := range queued {
		if m.Status == wamux.StatusWaitingSeq {
			updates = append(updates, store.MessageUpdate{MsgID: m.ID, From: waiting, Status: wamux.StatusQueued})
		}
	}
	for _, m := range held {
		updates = append(updates, store.MessageUpdate{MsgID: m.ID, From: waiting, Status: wamux.StatusHeld})
		w.d.metrics.held.WithLabelValues(w.id).Inc()
		w.d.log.Warn("message held: its client_seq arrived after the gap was skipped", "account_id", w.id, "msg_id", m.ID, "client_seq", m.ClientSeq)
	}
	if len(updates) == 0 && !seqChanged && !w.seqDirty {
		return queued
	}
	updates = append(w.unsaved, updates...)
	err := errAbandoned
	if w.fenceAll(updates) {
		ctx, cancel := bg()
		_, err = w.d.store.ApplySeq(ctx, w.buf.State(), updates)
		cancel()
	}
	if err != nil {
		// Rewriting a status change is harmless: it applies only from
		// waiting_seq. A step the store refused (another node holds the
		// account now) is kept too, and never written: the worker
		// stops, and the next holder sequences the messages again from
		// the store.
		switch {
		case err == errAbandoned:
		case errors.Is(err, store.ErrFenced):
			w.fenced(w.lease, "", err)
		default:
			w.d.log.Error("store sequencing step", "account_id", w.id, "messages", len(updates), "err", err)
		}
		w.seqDirty, w.unsaved = true, updates
		w.seqRetryAt = w.d.clock.Now().Add(seqRetryDelay)
		var ready []wamux.Message
		for _, m := range queued {
			if m.ClientSeq == 0 {
				ready = append(ready, m)
			} else {
				w.unstored = append(w.unstored, m)
			}
		}
		return ready
	}
	ready := append(w.unstored, queued...)
	w.seqDirty, w.unsaved, w.unstored = false, nil, nil
	return ready
}

// retrySeq writes a failed sequencing step again once its wait is over (at
// once when stopping) and queues the messages it released.
func (w *worker) retrySeq(stopping bool) {
	if !w.seqDirty || (!stopping && w.d.clock.Now().Before(w.seqRetryAt)) {
		return
	}
	if ready := w.persistSeq(nil, nil, false); len(ready) > 0 {
		w.enqueue(ready, w.d.clock.Now(), w.d.settings.Current().P2MaxDepth)
	}
}

// seqRetryDue is when retrySeq writes a failed step again (zero: nothing
// to write).
func (w *worker) seqRetryDue() time.Time {
	if !w.seqDirty {
		return time.Time{}
	}
	return w.seqRetryAt
}

// enqueue puts released messages in the queues, or leaves them in the
// store behind the account's backlog there (hold); a P2 message beyond
// p2_max_depth, counting both, is shed at once.
func (w *worker) enqueue(ms []wamux.Message, now time.Time, p2MaxDepth int) {
	for _, m := range ms {
		m.Status = wamux.StatusQueued
		if m.Priority == wamux.P2 && w.q.depth[wamux.P2]+w.win.stored[wamux.P2] >= p2MaxDepth {
			w.shed(m, "depth")
			continue
		}
		w.hold(&item{msg: m, enqueued: now}, now)
	}
}

// shed drops a P2 message under overload.
func (w *worker) shed(m wamux.Message, reason string) {
	w.d.metrics.shed.WithLabelValues(w.id, reason).Inc()
	ctx, cancel := bg()
	defer cancel()
	why := "shed under overload: p2_max_" + reason
	u := store.MessageUpdate{MsgID: m.ID, From: []wamux.Status{wamux.StatusQueued, wamux.StatusWaitingSeq},
		Status: wamux.StatusDropped, LastError: &why}
	if _, err := w.update(ctx, u); err != nil {
		w.d.log.Error("store shed message", "account_id", w.id, "msg_id", m.ID, "err", err)
	}
}

// dispatch starts every send the limits allow now and returns when it is
// worth looking again (zero: only an event can change anything).
func (w *worker) dispatch() time.Time {
	now := w.d.clock.Now()
	next := w.q.promote(now)
	if !w.held() {
		// Another node works on the account: the revoke stops this
		// worker, and the next assignment starts another.
		return time.Time{}
	}
	acct := w.snapshotAccount()
	switch acct.State {
	case wamux.AccountDisabled:
		w.compensateDisabled()
		return next
	case wamux.AccountCooldown:
		if acct.CooldownUntil.IsZero() {
			return time.Time{}
		}
		if now.Before(acct.CooldownUntil) {
			return earliest(next, acct.CooldownUntil)
		}
	}
	if w.q.len() > 0 {
		if until := w.appPaused(acct, now); !until.IsZero() {
			return earliest(next, until)
		}
	}
	s := w.d.settings.Current()
	gate := ratelimit.Gate{Accounts: w.d.limiter, Pairs: w.d.pairs}
	maxIn := w.maxInflight(acct)
	for p := 0; p < 3; p++ {
		for len(w.q.ready[p]) > 0 {
			if w.inflight >= maxIn {
				return next
			}
			wait, blocked := w.startHead(p, now, s, gate)
			next = earliest(next, wait)
			if blocked {
				return next
			}
		}
	}
	return next
}

// startHead takes the first ready recipient of priority p and starts what
// its head message needs: shed (P2 too old), compensation (unknown
// outcome) or a send, when the limits allow. blocked says the account's
// bucket (or the limiter) stops every send now, the recipient staying
// first in line; wait is when to look again (zero: no need).
func (w *worker) startHead(p int, now time.Time, s settings.Values, gate ratelimit.Gate) (wait time.Time, blocked bool) {
	r := w.q.ready[p][0]
	it := r.head()
	// Only a queued item may be shed: one of unknown outcome (unknown or
	// resend) is stored unknown, which shedding cannot record;
	// compensation decides it.
	if it.msg.Priority == wamux.P2 && it.state == itemQueued && now.Sub(it.enqueued) > s.P2MaxAge {
		w.q.popReady(p)
		r.pop()
		w.q.removed(it)
		w.shed(it.msg, "age")
		w.q.schedule(r, now)
		return time.Time{}, false
	}
	if it.state == itemUnknown {
		w.q.popReady(p)
		w.launch(r, it, w.compensate)
		return time.Time{}, false
	}
	adm, err := gate.Admit(context.Background(), w.id, r.to)
	if err != nil {
		w.d.log.Error("rate limiter", "account_id", w.id, "err", err)
		return now.Add(time.Second), true
	}
	if adm.PairLimited {
		w.q.popReady(p)
		r.notBefore = now.Add(adm.Wait)
		w.q.schedule(r, now)
		return r.notBefore, false
	}
	if !adm.OK {
		return now.Add(adm.Wait), true
	}
	w.q.popReady(p)
	w.launch(r, it, w.send)
	return time.Time{}, false
}

// compensateDisabled looks, on a disabled account, for a status that
// resolves each unknown outcome whose quiet period is over, as dispatch
// does on an active one. Compensation calls no provider: a message
// resolved (or failed after max_attempts) frees its recipient to move to
// another account (evacuate); one still unknown becomes a resend, which
// waits here for the account to be re-enabled.
func (w *worker) compensateDisabled() {
	for p := range w.q.ready {
		kept := w.q.ready[p][:0]
		for _, r := range w.q.ready[p] {
			if it := r.head(); it.state == itemUnknown && w.inflight < w.d.maxIn {
				w.launch(r, it, w.compensate)
				continue
			}
			kept = append(kept, r)
		}
		clear(w.q.ready[p][len(kept):])
		w.q.ready[p] = kept
	}
}

func (w *worker) launch(r *recipient, it *item, fn func(*item) (action, time.Duration)) {
	r.inflight = true
	w.inflight++
	w.calls.Add(1)
	go func() {
		act, delay := fn(it)
		w.done <- completion{r: r, it: it, act: act, delay: delay}
	}()
}

// complete files a recipient again after an attempt.
func (w *worker) complete(c completion) {
	w.inflight--
	w.calls.Add(-1)
	c.r.inflight = false
	// The attempt ran on its own goroutine; the count is kept here, where
	// the item is seen again after it.
	if unknown := c.it.state == itemUnknown && c.act == actRetry; unknown != c.it.counted {
		c.it.counted = unknown
		if unknown {
			w.unknownN++
		} else {
			w.unknownN--
		}
	}
	now := w.d.clock.Now()
	switch c.act {
	case actDone:
		c.r.pop()
		w.q.removed(c.it)
		c.r.notBefore = time.Time{}
	case actRetry:
		c.r.notBefore = now.Add(c.delay)
	}
	w.q.schedule(c.r, now)
	if w.snapshotAccount().State == wamux.AccountDisabled {
		// The recipient may have become free to move.
		w.requestEvacuation()
	}
}
