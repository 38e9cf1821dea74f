package agent

import (
	"time"

	"github.com/wamux/wamux"
)

// MaxMessageIDLen bounds a message id; wamids are about 60 bytes, and the
// bound keeps a spool record and a request of MaxBatchLimit receipts small.
const MaxMessageIDLen = 1024

// Receipt is one status report about one provider message of the agent's
// account.
type Receipt struct {
	// MessageID is the provider's id of the message (the wamid).
	MessageID string
	Type      wamux.ReceiptType
	// EventTime is when the status happened; it is sent with millisecond
	// precision.
	EventTime time.Time
	// Version is an optional ordering hint for the gateway; 0 sends none.
	Version int
}

func (r Receipt) validate() error {
	if r.MessageID == "" || len(r.MessageID) > MaxMessageIDLen {
		return wamux.Errorf(wamux.EInvalid, "agent: message_id must have 1 to %d bytes", MaxMessageIDLen)
	}
	if _, err := wamux.ParseReceiptType(string(r.Type)); err != nil {
		return err
	}
	if r.EventTime.UnixMilli() <= 0 {
		return wamux.Errorf(wamux.EInvalid, "agent: event_time must be after 1970")
	}
	if r.Version < 0 {
		return wamux.Errorf(wamux.EInvalid, "agent: version must not be negative")
	}
	return nil
}

// record is a receipt as the spool keeps it and the wire carries it. Seq
// orders records in the spool; it is not sent.
type record struct {
	Seq       uint64 `json:"seq,omitempty"`
	MessageID string `json:"message_id"`
	Type      string `json:"type"`
	EventTime int64  `json:"event_time"`
	Version   int    `json:"version,omitempty"`
}

func newRecord(r Receipt) record {
	return record{MessageID: r.MessageID, Type: string(r.Type), EventTime: r.EventTime.UnixMilli(), Version: r.Version}
}
