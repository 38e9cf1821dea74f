package outbound

import (
	"context"
	"time"

	"github.com/wamux/wamux/ratelimit"
)

// AttemptsRunning is how many provider calls and compensations of an
// account were launched and not yet completed by its worker.
func (d *Dispatcher) AttemptsRunning(accountID string) int {
	if w, ok := d.worker(accountID); ok {
		return int(w.calls.Load())
	}
	return 0
}

// EvacuateNow runs one pass moving a disabled account's routed recipients
// elsewhere, as its evacuator does, and returns when the evacuator would
// look again unwoken (0: never).
func (d *Dispatcher) EvacuateNow(accountID string) time.Duration {
	w, ok := d.worker(accountID)
	if !ok {
		return 0
	}
	return d.evacuate(context.Background(), w)
}

// Settle returns once the account's worker has been round its loop twice
// since the call: at least one whole pass (intake, dispatch) ran after
// anything the caller did before it, such as moving a fake clock.
func (d *Dispatcher) Settle(accountID string) {
	w, ok := d.worker(accountID)
	if !ok {
		return
	}
	for range 2 {
		reply := make(chan []string, 1)
		select {
		case w.scans <- reply:
			<-reply
		case <-w.exited:
			return
		}
	}
}

// LimitState reports the adaptive limiter's view (cooldowns set by 429s).
func (d *Dispatcher) LimitState(accountID string) ratelimit.AccountLimit {
	return d.limiter.Limit(accountID)
}

// Kick wakes every worker to look at its queues and timers now, and every
// evacuator to write owed owners and, on a disabled account, to look for
// recipients to move.
func (d *Dispatcher) Kick() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, w := range d.workers {
		w.kick()
		w.requestEvacuation()
	}
}

// HeldPeak is the most messages the account's queues have held in memory
// at once, as of the worker's last round.
func (d *Dispatcher) HeldPeak(accountID string) int {
	w, ok := d.worker(accountID)
	if !ok {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peakSnap
}

// Works reports whether the dispatcher has a worker for the account (with
// an Ownership: the account is held here, and not revoked).
func (d *Dispatcher) Works(accountID string) bool {
	_, ok := d.worker(accountID)
	return ok
}
