package wamux

import (
	"strconv"
	"time"
)

// ReceiptRank is the part of a receipt the merge order compares.
type ReceiptRank struct {
	Type      ReceiptType
	EventTime time.Time
	ErrorCode int
}

// Rank is r's place in the merge order.
func (r Receipt) Rank() ReceiptRank {
	return ReceiptRank{Type: r.Type, EventTime: r.EventTime, ErrorCode: r.ErrorCode}
}

// Compare orders two receipts of one message as the merge keeps them:
// negative when a is below b, zero when equal, positive when above. The
// stronger type wins (Version: sent < failed < delivered < read), then the
// later event time, then the larger error code. The last tie-break only
// makes the order total, so that two failures with the same timestamp
// merge to the same state in any order.
func (a ReceiptRank) Compare(b ReceiptRank) int {
	if c := a.Type.Version() - b.Type.Version(); c != 0 {
		return c
	}
	if c := a.EventTime.Compare(b.EventTime); c != 0 {
		return c
	}
	switch {
	case a.ErrorCode < b.ErrorCode:
		return -1
	case a.ErrorCode > b.ErrorCode:
		return 1
	}
	return 0
}

// MessageStatusFor maps the merged receipt type of a provider message to
// the status its outbound message should have, and the last error to
// record with it. code and title are the failure's, and permanent tells
// whether a failure code means the message will never be delivered as it
// is (the provider's classification). The receipt pipeline applies it
// when a status arrives; the dispatcher applies it when it records the
// wamid of an accepted send, because a status may arrive before the
// send's response does.
//
//   - sent, delivered, read → the same message status;
//   - failed with a permanent code → failed, with the reason;
//   - failed with any other code proves only that the provider accepted
//     the message → accepted, with the reason as last error (this still
//     resolves an unknown outcome: the message must not be resent);
//   - anything else → "" (nothing to apply).
func MessageStatusFor(t ReceiptType, code int, title string, permanent func(code int) bool) (Status, string) {
	switch t {
	case ReceiptSent:
		return StatusSent, ""
	case ReceiptDelivered:
		return StatusDelivered, ""
	case ReceiptRead:
		return StatusRead, ""
	case ReceiptFailed:
		reason := FailureReason(code, title)
		if permanent(code) {
			return StatusFailed, reason
		}
		return StatusAccepted, reason
	}
	return "", ""
}

// FailureReason is the last error recorded for a failed status.
func FailureReason(code int, title string) string {
	if title == "" {
		return "provider reported failure (code " + strconv.Itoa(code) + ")"
	}
	return "provider reported failure (code " + strconv.Itoa(code) + "): " + title
}

// LastErrorFor is the change a status applied to a message makes to its
// last_error: the reason when there is one; cleared for delivered and
// read, which prove arrival and override a failed status seen before (the
// failure stays visible as the message's failed receipt time); otherwise
// unchanged (nil).
func LastErrorFor(target Status, reason string) *string {
	switch {
	case reason != "":
		return &reason
	case target == StatusDelivered || target == StatusRead:
		cleared := ""
		return &cleared
	}
	return nil
}

// ForwardFrom lists the message statuses a status may replace: statuses
// only move forward (accepted < sent < delivered < read), failed replaces
// accepted and sent but never delivered or read, and a message whose send
// is still unanswered (sending) or ambiguous (unknown) is resolved by any
// status, since a status proves the provider accepted it.
func ForwardFrom(target Status) []Status {
	pending := []Status{StatusSending, StatusUnknown}
	switch target {
	case StatusAccepted:
		return pending
	case StatusSent:
		return append(pending, StatusAccepted)
	case StatusFailed:
		return append(pending, StatusAccepted, StatusSent)
	case StatusDelivered:
		// delivered is proof of arrival and beats an earlier failed.
		return append(pending, StatusAccepted, StatusSent, StatusFailed)
	case StatusRead:
		return append(pending, StatusAccepted, StatusSent, StatusFailed, StatusDelivered)
	}
	return nil
}
