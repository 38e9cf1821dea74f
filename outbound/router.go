package outbound

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/store"
)

// usable reports whether an account can take new recipients now: active in
// the store and not cooling down in the limiter.
func (d *Dispatcher) usable(a wamux.Account) bool {
	if a.State != wamux.AccountActive {
		return false
	}
	return d.limiter.Limit(a.ID).State == wamux.AccountActive
}

// route returns the account that sends to a recipient. A recipient keeps
// its owner (sticky: one conversation, one business number); a recipient
// without one, or whose owner is disabled or cooling down, gets the pool
// account where it would go out soonest (bestOf; when every active account
// is cooling down, the one whose cooldown ends first), and the choice is
// recorded with its reason.
//
// planned counts the messages already given to each account earlier in the
// same batch: they take tokens as soon as they reach the worker, so they
// are counted against the account now.
func (d *Dispatcher) route(ctx context.Context, to string, planned map[string]int) (acc string, err error) {
	d.routeMu.Lock()
	defer d.routeMu.Unlock()
	defer func() {
		if err == nil {
			d.transit[to]++ // until Submit hands it over (arrived)
		}
	}()
	owner, err := d.ownerOf(ctx, to)
	if err != nil {
		return "", err
	}
	pool, current, hasOwner := d.pool(owner)
	if hasOwner && d.usable(current) {
		return owner, nil
	}
	pick := d.bestOf(ctx, pool, planned)
	switch {
	case pick != "":
	case owner != "":
		// Nobody better: keep the owner; its queue holds the message
		// until the account is back.
		return owner, nil
	default:
		if pick = d.firstBackFromCooldown(pool); pick == "" {
			return "", wamux.Errorf(wamux.EUnavailable, "no active account to send from; create one or re-enable one")
		}
	}
	reason, moved := "first", 0
	if owner != "" {
		var all bool
		if moved, all = d.moveRecipient(ctx, to, owner, pick); !all {
			// The recipient's messages on its owner must go out from
			// there first: the new one queues behind them.
			return owner, nil
		}
		reason = "owner_unavailable"
	}
	if err := d.recordOwner(ctx, to, pick, reason, moved); err != nil {
		return "", fmt.Errorf("outbound: record owner: %w", err)
	}
	d.metrics.reroutes.WithLabelValues(reason).Inc()
	return pick, nil
}

// owedOwner is a recipient's owner that the store does not have yet.
type owedOwner struct{ account, reason string }

// recordOwner stores acc as the owner of recipient to, after moved of its
// queued messages went over to acc. The caller holds routeMu. When the
// write fails and nothing moved, the old owner still holds everything of
// the recipient and the error is returned. When messages did move, the
// recipient belongs to acc whatever the store says: were its next message
// routed by the stale owner, it would go out from there before the moved
// ones. So the owner is kept in memory (owed), answered by ownerOf, and
// written again at the recipient's next routing and at every evacuation
// pass until it lands; after a crash, Start finds it from where the
// messages are (repairOwners).
func (d *Dispatcher) recordOwner(ctx context.Context, to, acc, reason string, moved int) error {
	err := d.store.SetOwner(ctx, to, acc, reason)
	if err == nil {
		delete(d.owed, to)
		return nil
	}
	if moved == 0 {
		return err
	}
	d.owed[to] = owedOwner{account: acc, reason: reason}
	d.log.Error("record the owner of a recipient whose messages moved; kept in memory and retried", "to_account", acc, "reason", reason, "err", err)
	if w, ok := d.worker(acc); ok {
		w.requestEvacuation() // its evacuator writes owed owners until they land
	}
	return nil
}

// flushOwed writes again the owners recordOwner could not store. The
// caller holds routeMu.
func (d *Dispatcher) flushOwed(ctx context.Context) {
	for to, o := range d.owed {
		if err := d.store.SetOwner(ctx, to, o.account, o.reason); err != nil {
			return // the store is still failing; try at the next pass
		}
		delete(d.owed, to)
	}
}

// ownerOf is the recipient's owner, "" when it has none yet. The caller
// holds routeMu.
func (d *Dispatcher) ownerOf(ctx context.Context, to string) (string, error) {
	if o, ok := d.owed[to]; ok {
		if err := d.store.SetOwner(ctx, to, o.account, o.reason); err == nil {
			delete(d.owed, to)
		}
		return o.account, nil
	}
	owner, err := d.store.GetOwner(ctx, to)
	switch code := wamux.ErrorCode(err); {
	case err == nil:
		return owner, nil
	case code == wamux.ENotFound:
		return "", nil
	default:
		return "", fmt.Errorf("outbound: owner of recipient: %w", err)
	}
}

// pool is a snapshot of the accounts, and of the one with the given id.
func (d *Dispatcher) pool(id string) ([]wamux.Account, wamux.Account, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	pool := make([]wamux.Account, 0, len(d.accounts))
	for _, a := range d.accounts {
		pool = append(pool, a)
	}
	a, ok := d.accounts[id]
	return pool, a, ok
}

// bestOf is the usable account of the pool where a new message would go
// out soonest, "" when none is usable. Its score is the account's headroom
// in seconds of its effective rate: tokens left, less the messages queued
// there and planned (already given to it and not yet charged). An idle
// pool spreads by spare tokens; a busy one, where every bucket is empty
// and tokens alone tie, by how long its queues take to drain. A new
// recipient sticks to its account, so one routed behind a long queue
// waits that long for every message while others have capacity.
func (d *Dispatcher) bestOf(ctx context.Context, pool []wamux.Account, planned map[string]int) string {
	type candidate struct {
		id       string
		headroom float64
	}
	var cands []candidate
	for _, a := range pool {
		lim := d.limiter.Limit(a.ID)
		if a.State != wamux.AccountActive || lim.State != wamux.AccountActive {
			continue
		}
		tokens, _ := d.limiter.Tokens(ctx, a.ID)
		backlog := planned[a.ID]
		if w, ok := d.worker(a.ID); ok {
			backlog += w.backlog()
		}
		cands = append(cands, candidate{a.ID, (tokens - float64(backlog)) / lim.EffectiveRate})
	}
	if len(cands) == 0 {
		return ""
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].headroom != cands[j].headroom {
			return cands[i].headroom > cands[j].headroom
		}
		return cands[i].id < cands[j].id
	})
	return cands[0].id
}

// firstBackFromCooldown is the active account whose cooldown ends first,
// or "" when none is active. Every account cooling down at once (all of an
// app's after a code 4, or the only one after repeated 429s) is the
// gateway pacing itself: a new recipient's message is queued there, as an
// owned recipient's is, rather than refused.
func (d *Dispatcher) firstBackFromCooldown(pool []wamux.Account) string {
	var pick string
	var end time.Time
	for _, a := range pool {
		if a.State != wamux.AccountActive {
			continue
		}
		until := d.limiter.Limit(a.ID).CooldownUntil
		if pick == "" || until.Before(end) || (until.Equal(end) && a.ID < pick) {
			pick, end = a.ID, until
		}
	}
	return pick
}

// moveRecipient takes a recipient's messages still waiting on its old
// owner, from, over to dest, in their order, before the recipient's newer
// messages are routed to dest: otherwise the newer ones go out from dest
// while the older wait for from to come back, and the customer reads them
// out of order. It reports whether the recipient may move: not while from
// has one of its messages with the provider or with an unknown outcome
// (its answer may requeue it, and a resend must come from the number whose
// statuses resolve it, reference §7), nor while a message whose account
// the client chose is among them. Then the recipient stays and its new
// messages queue behind, on from. moved is how many messages went to dest.
func (d *Dispatcher) moveRecipient(ctx context.Context, to, from, dest string) (moved int, all bool) {
	old, ok := d.worker(from)
	if !ok {
		// With an Ownership, from may be another node's: its messages
		// are moved only by their holder (its evacuator), and the
		// recipient stays behind them until then.
		return 0, d.own == nil
	}
	next, ok := d.worker(dest)
	if !ok {
		return 0, false
	}
	res := old.handOver(ctx, to, dest)
	if res.lost != ([3]int{}) {
		// A failed move left these under dest in the store: it must
		// find them there, although the recipient stays.
		next.adopt(nil, res.lost)
	}
	n := len(res.moved) + res.stored[0] + res.stored[1] + res.stored[2]
	if n > 0 {
		next.adopt(res.moved, res.stored)
		d.log.Info("queued messages moved with their recipient", "from", from, "to_account", dest, "messages", n)
	}
	return n, res.all
}

// handoff asks a worker's run goroutine, which owns the queues, to give up
// a recipient's messages to account dest.
type handoff struct {
	to, dest string
	reply    chan handoffResult
}

type handoffResult struct {
	moved []*item // now stored under dest, in the recipient's order
	// stored counts per priority the messages that moved from the store
	// alone (beyond the window): dest loads them.
	stored [3]int
	// lost counts those a failed move left under dest, whose move back
	// failed too.
	lost [3]int
	all  bool // the worker has nothing left of the recipient
}

// handOver runs a handoff on the worker's goroutine. A worker that has
// stopped, or a caller that gives up, moves nothing.
func (w *worker) handOver(ctx context.Context, to, dest string) handoffResult {
	h := handoff{to: to, dest: dest, reply: make(chan handoffResult, 1)}
	select {
	case w.handoffs <- h:
	case <-w.exited:
		return handoffResult{}
	case <-ctx.Done():
		return handoffResult{}
	}
	return <-h.reply
}

// adopt queues messages moved here with their recipient, ahead of what the
// inbox holds; stored counts those that moved in the store alone, which
// the window loads behind them.
func (w *worker) adopt(its []*item, stored [3]int) {
	w.mu.Lock()
	w.adopted = append(w.adopted, its...)
	for p := range stored {
		w.adoptedStored[p] += stored[p]
	}
	w.mu.Unlock()
	w.kick()
	if w.snapshotAccount().State == wamux.AccountDisabled {
		// Disabled since it was chosen: they move on from here.
		w.requestEvacuation()
	}
}

// yieldRecipient gives up to dest the messages of a recipient that all
// wait here, stored under dest first, in their order: those in the queues,
// then those only in the store (beyond the window), which dest loads
// behind them. Messages still in the inbox are queued first, so none is
// left behind. The move is all or nothing: when a store write fails,
// those already stored under dest are stored back here and the recipient
// stays with all of them. Moving only the first ones would split it, and
// its next messages, routed to dest after them, would go out before the
// rest.
func (w *worker) yieldRecipient(to, dest string) handoffResult {
	if w.stopping {
		return handoffResult{}
	}
	// Attempts that already answered count as done, not in flight.
	for drained := false; !drained; {
		select {
		case c := <-w.done:
			w.complete(c)
		default:
			drained = true
		}
	}
	w.intake()
	r, ok := w.q.byTo[to]
	if ok && !movable(r) {
		return handoffResult{}
	}
	stored, err := w.storedOf(to)
	if err != nil {
		w.d.log.Error("move a recipient", "account_id", w.id, "err", err)
		return handoffResult{}
	}
	for _, m := range stored {
		if !admit.Routed(m) {
			return handoffResult{}
		}
	}
	if !ok && len(stored) == 0 {
		return handoffResult{all: true}
	}
	if !w.held() {
		return handoffResult{}
	}
	var moved []*item
	var msgs []*item
	if ok {
		msgs = r.msgs
	}
	for _, it := range msgs {
		m := it.msg
		m.AccountID = dest
		ctx, cancel := bg()
		from := []wamux.Status{wamux.StatusQueued}
		if it.maybeSending {
			// Its write marking it sending failed but may have
			// committed; the provider was not called after it.
			from = append(from, wamux.StatusSending)
		}
		ok, err := w.update(ctx, store.MessageUpdate{MsgID: m.ID, From: from,
			Status: wamux.StatusQueued, AccountID: dest})
		cancel()
		if errors.Is(err, store.ErrFenced) {
			// Another node holds this account now and cannot undo the
			// move: what moved so far is dest's to load.
			return handoffResult{lost: countOf(moved)}
		}
		if err != nil || !ok {
			w.d.log.Error("move a queued message with its recipient", "account_id", w.id, "to_account", dest, "msg_id", m.ID, "moved", ok, "err", err)
			w.unmove(moved)
			return handoffResult{}
		}
		moved = append(moved, &item{msg: m, enqueued: it.enqueued, retries: it.retries})
	}
	res := handoffResult{moved: moved}
	for i, m := range stored {
		ctx, cancel := bg()
		ok, err := w.update(ctx, store.MessageUpdate{MsgID: m.ID, From: []wamux.Status{wamux.StatusQueued},
			Status: wamux.StatusQueued, AccountID: dest})
		cancel()
		if errors.Is(err, store.ErrFenced) {
			lost := countOf(moved)
			for _, m := range stored[:i] {
				lost[m.Priority]++
			}
			return handoffResult{lost: lost}
		}
		if err != nil || !ok {
			w.d.log.Error("move a queued message with its recipient", "account_id", w.id, "to_account", dest, "msg_id", m.ID, "moved", ok, "err", err)
			w.unmove(moved)
			return handoffResult{lost: w.unmoveStored(stored[:i])}
		}
		res.stored[m.Priority]++
	}
	if ok {
		now := w.d.clock.Now()
		w.q.unfile(r)
		for range moved {
			w.q.removed(r.pop())
		}
		w.q.schedule(r, now)
	}
	for p, n := range res.stored {
		w.win.stored[p] = max(w.win.stored[p]-n, 0)
	}
	res.all = true
	return res
}

// unmoveStored stores back under this account messages a failed handoff
// had moved in the store alone, and counts those it could not.
func (w *worker) unmoveStored(ms []wamux.Message) [3]int {
	var lost [3]int
	for _, m := range ms {
		ctx, cancel := bg()
		_, err := w.update(ctx, store.MessageUpdate{MsgID: m.ID, From: []wamux.Status{wamux.StatusQueued},
			Status: wamux.StatusQueued, AccountID: w.id})
		cancel()
		if err != nil {
			w.d.log.Error("store a message back under its account after a failed move", "account_id", w.id, "msg_id", m.ID, "err", err)
			lost[m.Priority]++
		}
	}
	return lost
}

// unmove stores back under this account the messages a failed handoff
// had already stored under another. One whose write fails too is sent
// from here all the same (the queue in memory decides that); only a
// restart would find it under the other account.
func (w *worker) unmove(its []*item) {
	for _, it := range its {
		ctx, cancel := bg()
		_, err := w.update(ctx, store.MessageUpdate{MsgID: it.msg.ID, From: []wamux.Status{wamux.StatusQueued},
			Status: wamux.StatusQueued, AccountID: w.id})
		cancel()
		if err != nil {
			w.d.log.Error("store a message back under its account after a failed move", "account_id", w.id, "msg_id", it.msg.ID, "err", err)
		}
	}
}

// countOf counts items per priority.
func countOf(its []*item) [3]int {
	var n [3]int
	for _, it := range its {
		n[it.msg.Priority]++
	}
	return n
}

// movable reports whether every message of a recipient waits in the queue
// and may leave the account: none with the provider or of unknown outcome
// (those are the head), none whose account the client chose. One whose
// sending mark failed to be written (maybeSending) never reached the
// provider, so it may move.
func movable(r *recipient) bool {
	if r.inflight {
		return false
	}
	for _, it := range r.msgs {
		if it.state != itemQueued || !admit.Routed(it.msg) {
			return false
		}
	}
	return true
}
