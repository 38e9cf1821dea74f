// Package receipts turns the stream of status receipts into one current
// status per provider message: the dedup chain in front of the store (L1 a
// per-account LRU, L2 Bloom filters by hour bucket) and the merge rule that
// makes the result independent of the order receipts arrive in.
//
// Everything here is pure or in-memory: the store is reached only through
// the narrow Confirmer interface, so the pipeline decides when to write.
package receipts

import (
	"fmt"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// Decision is what one receipt does to the merged state of its message.
type Decision int

const (
	// Ignore: the receipt is a duplicate of, or weaker than, the state.
	Ignore Decision = iota
	// Apply: the receipt replaces the state.
	Apply
	// Late: the receipt would replace the state, but it is out of order and
	// came after the late window; it goes to the audit table instead.
	Late
)

// String is the decision's metric label.
func (d Decision) String() string {
	switch d {
	case Ignore:
		return "ignore"
	case Apply:
		return "apply"
	case Late:
		return "late"
	}
	return fmt.Sprintf("Decision(%d)", int(d))
}

// LateReason is the Reason recorded with a receipt that Merge called Late.
const LateReason = "out of order after the late window"

// Merge decides what receipt r does to cur, the merged state of r's message
// (nil when the message has none yet), at time now. It returns the state
// after r and the decision; next is *cur (or the zero state when cur is nil)
// unless d is Apply. r must be about cur's message: Merge panics otherwise,
// since mixing two messages' receipts is a bug in the caller, not bad input.
//
// The rule orders receipts by the triple
//
//	(r.Type.Version(), r.EventTime, r.ErrorCode)
//
// compared left to right, and the state is the greatest receipt seen:
//
//   - a stronger type wins: sent < failed < delivered < read. So failed is
//     final against sent, and delivered or read beat failed whichever came
//     first — they prove the message arrived;
//   - at equal strength the later event_time wins;
//   - at equal strength and event_time the larger error code wins. Any
//     deterministic tie-break would do; without one, two failures with the
//     same timestamp would leave whichever was merged last.
//
// A receipt not greater than the state is Ignore: a repeat is equal to it,
// a weaker one is less. Because the state is a maximum under a total order,
// Merge is commutative, associative and idempotent: any permutation and
// duplication of the same receipts ends in the same state. A receipt of an
// unknown type (Version 0) is always Ignore.
//
// Late is the one exception, and it is why the guarantee holds only within
// the window. A receipt that is greater than the state but whose event_time
// is before the state's (so it was overtaken by a later event) is Late when
//
//	r.ReceivedAt.Sub(cur.UpdatedAt) > lateWindow
//
// i.e. when the state had stood unchallenged for longer than the window
// by the time r arrived (ReceivedAt; now when it is unset or after now).
// The state had been published by then, and flipping it on an old event
// (a failed turned delivered an hour later, say) is what the audit table is
// for. A receipt that waited in the log (apply_state off, a backlog, a
// restart) is judged by its arrival, not by when it is merged. Only a
// stronger type can be both greater and earlier, so Late is always a
// change of type. An Apply sets UpdatedAt to now.
//
// In the pipeline a receipt of the state's own type is a repeat of the
// receipt that made the state (L3 keeps the first of a key), so it is
// Ignore there whatever its event time or code, and so is any receipt L3
// finds stored: merged once already, late then or not (Pipeline.merge).
func Merge(cur *store.MessageState, r wamux.Receipt, now time.Time, lateWindow time.Duration) (next store.MessageState, d Decision) {
	if cur != nil {
		if cur.AccountID != r.AccountID || cur.MessageID != r.MessageID {
			panic(fmt.Sprintf("receipts: merging a receipt of %s/%s into the state of %s/%s",
				r.AccountID, r.MessageID, cur.AccountID, cur.MessageID))
		}
		next = *cur
	}
	if r.Type.Version() == 0 {
		return next, Ignore
	}
	if cur != nil && r.Rank().Compare(stateRank(cur)) <= 0 {
		return next, Ignore
	}
	// The window is measured up to when r arrived (ReceivedAt), not to
	// when it is processed: a receipt that waited in the log (apply_state
	// off, a backlog, a restart) arrived in time all the same. A state
	// applied after r arrived (UpdatedAt > ReceivedAt) was not published
	// when r came, so r is not late against it.
	at := r.ReceivedAt
	if at.IsZero() || at.After(now) {
		at = now
	}
	if cur != nil && r.EventTime.Before(cur.EventTime) && at.Sub(cur.UpdatedAt) > lateWindow {
		return next, Late
	}
	return store.MessageState{
		StateKey:  store.StateKey{AccountID: r.AccountID, MessageID: r.MessageID},
		Type:      r.Type,
		EventTime: r.EventTime,
		ErrorCode: r.ErrorCode,
		UpdatedAt: now,
	}, Apply
}

// stateRank is the state's place in the merge order: that of the receipt that
// set it.
func stateRank(s *store.MessageState) wamux.ReceiptRank {
	return wamux.ReceiptRank{Type: s.Type, EventTime: s.EventTime, ErrorCode: s.ErrorCode}
}
