package agent

import (
	"strings"
	"time"
	"unicode/utf8"

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
	// Version is optional (0 sends none). When given it must agree with
	// Type — sent=1, delivered=2, read=3, any for failed — as the gateway
	// rejects a batch holding one that does not, and the merge orders by
	// type anyway.
	Version int
}

// wireVersion is the version the gateway expects for each type; failed has
// none of its own.
var wireVersion = map[wamux.ReceiptType]int{wamux.ReceiptSent: 1, wamux.ReceiptDelivered: 2, wamux.ReceiptRead: 3}

// validate checks r as the gateway will; now is the agent's clock, against
// which an event_time more than wamux.MaxEventTimeAhead ahead is refused
// (the gateway compares it with its own clock when the batch arrives).
func (r Receipt) validate(now time.Time) error {
	// The gateway trims the id and rejects it if blank; JSON turns each
	// byte of invalid UTF-8 into a three-byte U+FFFD, which changes the id
	// and can push it over the limit both in the spool and at the gateway.
	if strings.TrimSpace(r.MessageID) == "" || len(r.MessageID) > MaxMessageIDLen {
		return wamux.Errorf(wamux.EInvalid, "agent: message_id must have 1 to %d bytes", MaxMessageIDLen)
	}
	if !utf8.ValidString(r.MessageID) || strings.IndexByte(r.MessageID, 0) >= 0 {
		return wamux.Errorf(wamux.EInvalid, "agent: message_id must be valid UTF-8 without NUL bytes")
	}
	if _, err := wamux.ParseReceiptType(string(r.Type)); err != nil {
		return err
	}
	// The gateway wants a whole second after 1970 and a year up to 9999.
	if ms := r.EventTime.UnixMilli(); ms < 1000 || time.UnixMilli(ms).UTC().Year() > 9999 {
		return wamux.Errorf(wamux.EInvalid, "agent: event_time must be between 1970-01-01T00:00:01Z and the year 9999")
	}
	if r.EventTime.Sub(now) > wamux.MaxEventTimeAhead {
		return wamux.Errorf(wamux.EInvalid, "agent: event_time is more than %s ahead of the clock", wamux.MaxEventTimeAhead)
	}
	if want, ok := wireVersion[r.Type]; r.Version < 0 || (ok && r.Version != 0 && r.Version != want) {
		return wamux.Errorf(wamux.EInvalid, "agent: version %d does not match type %s", r.Version, r.Type)
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
