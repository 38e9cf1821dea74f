package outbound

import (
	"context"
	"time"
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
