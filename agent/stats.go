package agent

import "sync/atomic"

// Stats are the agent's counters since New. They are plain numbers so the
// agent does not tie its users to a metrics library; export them however
// the host process does.
type Stats struct {
	// Reported counts receipts made durable in the spool by Report.
	Reported uint64
	// DroppedRepeats counts Reports dropped as a recent repeat.
	DroppedRepeats uint64
	// Replayed counts unacknowledged receipts found in the spool by New.
	Replayed uint64
	// Sent counts receipts put on the wire, once per attempt.
	Sent uint64
	// Acked counts receipts the gateway acknowledged.
	Acked uint64
	// Accepted and Duplicates are the gateway's split of Acked: new to it,
	// or already stored.
	Accepted   uint64
	Duplicates uint64
	// Retries counts attempts that failed and were retried, configuration
	// errors included.
	Retries uint64
	// DeadLettered counts receipts the gateway rejected for good and that
	// went to the dead-letter file.
	DeadLettered uint64
	// ConfigErrors counts attempts the gateway refused for a configuration
	// error (401, 403, 404, or 400 "unknown account_id"); their batches stay
	// spooled and are retried, so they count in Retries too. They have a
	// counter of their own because, unlike other retries, which a weak
	// network or a gateway restart causes and time cures, they go on until
	// someone fixes the APIKey, the GatewayURL or the account on the
	// gateway: any increase is worth an alert.
	ConfigErrors uint64
}

type counters struct {
	reported, droppedRepeats, replayed, sent, acked, accepted, duplicates, retries, deadLettered, configErrors atomic.Uint64
}

// Stats returns a snapshot of the counters.
func (a *Agent) Stats() Stats {
	c := &a.stats
	return Stats{
		Reported:       c.reported.Load(),
		DroppedRepeats: c.droppedRepeats.Load(),
		Replayed:       c.replayed.Load(),
		Sent:           c.sent.Load(),
		Acked:          c.acked.Load(),
		Accepted:       c.accepted.Load(),
		Duplicates:     c.duplicates.Load(),
		Retries:        c.retries.Load(),
		DeadLettered:   c.deadLettered.Load(),
		ConfigErrors:   c.configErrors.Load(),
	}
}
