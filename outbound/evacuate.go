package outbound

import (
	"context"
	"sort"
	"time"

	"github.com/wamux/wamux"
)

// evacRetry is how long a disabled account waits before trying again to
// move recipients a store failure kept there, and an evacuator before
// writing owed owners again.
const evacRetry = 5 * time.Second

// A disabled account's routed recipients move to the rest of the pool, with
// their queued messages, without waiting for a new message of theirs. Each
// worker has an evacuator goroutine for this, woken (requestEvacuation)
// whenever a recipient may have become movable or an account to take it
// may have appeared; it wakes itself when the cooldown that left it
// nowhere to go ends. A recipient moves only as moveRecipient allows.
// Every evacuator, on an active account too, first writes the owners whose
// store write failed after their recipient moved (recordOwner), and looks
// again after evacRetry while some are still owed.

// requestEvacuation wakes the account's evacuator; requests coalesce.
func (w *worker) requestEvacuation() {
	select {
	case w.evac <- struct{}{}:
	default:
	}
}

// evacuator moves the account's routed recipients elsewhere each time it
// is woken while the account is disabled, until ctx ends.
func (w *worker) evacuator(ctx context.Context) {
	defer w.d.wg.Done()
	stop := func() bool { return false }
	defer func() { stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.evac:
		}
		stop()
		if wait := w.d.evacuate(ctx, w); wait > 0 {
			stop = w.d.timers.AfterFunc(wait, w.requestEvacuation)
		}
	}
}

// rehomeOutcome is what became of one recipient of a disabled account.
type rehomeOutcome int

const (
	rehomeDone   rehomeOutcome = iota // moved, or nothing to move
	rehomeNoDest                      // no other account can take it now
	rehomeFailed                      // a store failure kept it, or some of it
)

// evacuate moves every recipient of a disabled account whose messages are
// all movable to the account route would give it now. Moves within one
// pass count against their destination, as a batch's routing does. It
// returns when to look again without being woken (0: no need): after a
// store failure, or, when no account could take a recipient but one is
// cooling down, when that cooldown ends (it ends in the limiter alone, and
// nothing else would wake the evacuator then).
func (d *Dispatcher) evacuate(ctx context.Context, w *worker) time.Duration {
	owed := d.writeOwed()
	if w.snapshotAccount().State != wamux.AccountDisabled {
		if owed {
			return evacRetry
		}
		return 0
	}
	planned := map[string]int{}
	var failed, noDest bool
	for _, to := range w.movableRecipients(ctx) {
		switch d.rehome(ctx, to, w.id, planned) {
		case rehomeFailed:
			failed = true
		case rehomeNoDest:
			noDest = true
		}
	}
	var wait time.Duration
	if noDest {
		pool, _, _ := d.pool("")
		if back := d.firstBackFromCooldown(pool); back != "" {
			until := d.limiter.Limit(back).CooldownUntil
			wait = max(until.Sub(d.clock.Now()), time.Second)
		}
	}
	if (failed || owed) && (wait == 0 || wait > evacRetry) {
		wait = evacRetry
	}
	return wait
}

// writeOwed writes the owners recordOwner could not store and reports
// whether some are still owed.
func (d *Dispatcher) writeOwed() bool {
	d.routeMu.Lock()
	defer d.routeMu.Unlock()
	if len(d.owed) == 0 {
		return false
	}
	ctx, cancel := bg()
	defer cancel()
	d.flushOwed(ctx)
	return len(d.owed) > 0
}

// movableRecipients asks the worker's run goroutine, which owns the
// queues, which recipients could leave the account now.
func (w *worker) movableRecipients(ctx context.Context) []string {
	reply := make(chan []string, 1)
	select {
	case w.scans <- reply:
	case <-w.exited:
		return nil
	case <-ctx.Done():
		return nil
	}
	return <-reply
}

// scanMovable lists, on the run goroutine, the recipients whose messages
// could all move (movable), in a stable order.
func (w *worker) scanMovable() []string {
	if w.stopping {
		return nil
	}
	w.intake()
	var tos []string
	for to, r := range w.q.byTo {
		if movable(r) {
			tos = append(tos, to)
		}
	}
	sort.Strings(tos)
	return tos
}

// rehome moves one recipient off from, a disabled account: to its owner
// when that is another usable account, else to the pool account route
// would pick for a new recipient. Nothing moves while from is not
// disabled (re-enabled meanwhile) or when no other account is usable. The
// owner change is recorded once the recipient's messages have moved (a
// handoff moves all of them or none): its later messages belong behind
// them.
func (d *Dispatcher) rehome(ctx context.Context, to, from string, planned map[string]int) rehomeOutcome {
	d.routeMu.Lock()
	defer d.routeMu.Unlock()
	if d.transit[to] > 0 {
		// A message routed to the recipient is on its way to an inbox
		// (perhaps from's): moving the rest now would leave it behind
		// them, and the recipient's next message could pass it. Its
		// arrival wakes the evacuator again.
		d.held[to] = true
		return rehomeFailed
	}
	// Store calls outlive Stop: an owner left unrecorded after its
	// messages moved would send the recipient's next message elsewhere.
	sctx, cancel := bg()
	defer cancel()
	owner, err := d.ownerOf(sctx, to)
	if err != nil {
		d.log.Error("move a disabled account's recipient", "account_id", from, "err", err)
		return rehomeFailed
	}
	pool, cur, ok := d.pool(owner)
	if !ok || owner == from || !d.usable(cur) {
		owner = ""
	}
	if a, ok := d.accountNow(from); !ok || a.State != wamux.AccountDisabled {
		return rehomeDone
	}
	dest := owner
	if dest == "" {
		dest = d.bestOf(ctx, pool, planned)
	}
	if dest == "" || dest == from {
		return rehomeNoDest
	}
	moved, all := d.moveRecipient(ctx, to, from, dest)
	planned[dest] += moved
	if moved > 0 && dest != owner {
		// recordOwner keeps the owner in memory when the write fails
		// (the messages are on dest now); the retry pass writes it.
		_ = d.recordOwner(sctx, to, dest, "account_disabled", moved)
		d.metrics.reroutes.WithLabelValues("account_disabled").Inc()
		if _, owed := d.owed[to]; owed {
			return rehomeFailed
		}
	}
	if !all && ctx.Err() == nil {
		// A store write failed (nothing moved), or the recipient got a
		// message in flight since it was listed (its answer wakes us
		// again).
		return rehomeFailed
	}
	return rehomeDone
}

// accountNow is the dispatcher's copy of an account.
func (d *Dispatcher) accountNow(id string) (wamux.Account, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, ok := d.accounts[id]
	return a, ok
}
