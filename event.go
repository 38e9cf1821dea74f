package wamux

import (
	"slices"
	"time"
)

// EventType names what an event to the business reports.
type EventType string

const (
	// EventMessageStatus: a message's status changed.
	EventMessageStatus EventType = "message.status"
	// EventMessageInbound: a customer wrote to a business number.
	EventMessageInbound EventType = "message.inbound"
	// EventAccountState: an account became active, cooled down or was
	// disabled.
	EventAccountState EventType = "account.state"
	// EventAny in a subscription's list matches every type.
	EventAny EventType = "*"
)

// EventTypes are the event types a subscription may name besides EventAny.
var EventTypes = []EventType{EventMessageStatus, EventMessageInbound, EventAccountState}

// Valid reports whether t is a known event type or EventAny.
func (t EventType) Valid() bool { return t == EventAny || slices.Contains(EventTypes, t) }

// Event is one change the business is told about, as the outbox keeps it.
// Which fields are set depends on Type.
type Event struct {
	// ID identifies the event; it is also its version: a message's later
	// change has a larger ID.
	ID int64
	// Cursor is the event's position in the feed (opaque to clients).
	Cursor    string
	Type      EventType
	AccountID string
	CreatedAt time.Time

	// message.status: the message's new and previously reported status,
	// its wamid and last error at the change, and its fixed fields.
	MsgID          string
	Status         string
	PreviousStatus string
	WAMID          string
	// Detail is the last error (message.status) or the reason
	// (account.state).
	Detail    string
	To        string
	BizType   string
	ClientSeq int64

	// account.state: the end of a cooldown.
	Until time.Time

	// message.inbound: the event data, as written at intake (JSON).
	Data []byte
}

// SubscriptionState says whether a subscription is delivered to.
type SubscriptionState string

const (
	// SubscriptionActive: events are delivered.
	SubscriptionActive SubscriptionState = "active"
	// SubscriptionDisabled: nothing is delivered until an operator
	// activates it again (set by the operator, or by a 410 Gone answer).
	SubscriptionDisabled SubscriptionState = "disabled"
	// SubscriptionFailing: an event failed for the whole retry window;
	// delivery stopped and the undelivered events are kept.
	SubscriptionFailing SubscriptionState = "failing"
)

// Valid reports whether s is a known subscription state.
func (s SubscriptionState) Valid() bool {
	switch s {
	case SubscriptionActive, SubscriptionDisabled, SubscriptionFailing:
		return true
	}
	return false
}

// Subscription is a business endpoint that receives events.
type Subscription struct {
	ID  string
	URL string
	// Events lists the types delivered; EventAny matches all.
	Events []EventType
	// AccountIDs restricts delivery to events of these accounts; empty
	// means all.
	AccountIDs  []string
	Description string
	State       SubscriptionState
	StateReason string
	// Secret signs deliveries; OldSecret signs them too until
	// OldSecretUntil (a rotation). Both are kept sealed by the store's
	// callers and never returned after creation or rotation.
	Secret         string
	OldSecret      string
	OldSecretUntil time.Time
	// Cursor is the feed position up to which events were queued for
	// delivery.
	Cursor    string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Matches reports whether the subscription wants events of type t from
// the account.
func (s Subscription) Matches(t EventType, accountID string) bool {
	if !slices.Contains(s.Events, EventAny) && !slices.Contains(s.Events, t) {
		return false
	}
	return len(s.AccountIDs) == 0 || slices.Contains(s.AccountIDs, accountID)
}

// String omits the secrets.
func (s Subscription) String() string {
	return "Subscription{ID:" + s.ID + " URL:" + s.URL + " State:" + string(s.State) + "}"
}

// GoString keeps %#v as safe as %v.
func (s Subscription) GoString() string { return s.String() }
