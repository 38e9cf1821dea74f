package outbound

// AttemptsRunning is how many provider calls and compensations of an
// account were launched and not yet completed by its worker.
func (d *Dispatcher) AttemptsRunning(accountID string) int {
	if w, ok := d.worker(accountID); ok {
		return int(w.calls.Load())
	}
	return 0
}
