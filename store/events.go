package store

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/wamux/wamux"
)

// EventStore keeps the event outbox, the subscriptions and their pending
// deliveries. Events are written by the store itself, in the transaction
// of the change they report (a message's status, an account's state, an
// inbound message), so no caller writes one.
type EventStore interface {
	// ListEvents returns up to limit events after the cursor ("" starts at
	// the oldest kept event) in feed order, and the cursor to continue
	// from (after unchanged when there is nothing). An event is listed
	// only once no event before it in feed order can still commit.
	ListEvents(ctx context.Context, after string, limit int) ([]wamux.Event, string, error)
	// EventCursorAt returns a cursor before the first event created at or
	// after t (the head when there is none).
	EventCursorAt(ctx context.Context, t time.Time) (string, error)
	// PruneEvents deletes up to limit events created before t and the
	// pending deliveries of those deleted, and reports how many events
	// went.
	PruneEvents(ctx context.Context, before time.Time, limit int) (int, error)

	// CreateSubscription stores a new subscription; its Cursor is set to
	// the head of the feed (it receives events written from now on) and
	// CreatedAt/UpdatedAt by the store. An existing id → EConflict.
	CreateSubscription(ctx context.Context, s wamux.Subscription) (wamux.Subscription, error)
	// GetSubscription → ENotFound when absent.
	GetSubscription(ctx context.Context, id string) (wamux.Subscription, error)
	// ListSubscriptions returns every subscription ordered by id.
	ListSubscriptions(ctx context.Context) ([]wamux.Subscription, error)
	// UpdateSubscription applies the non-nil fields of p → ENotFound when
	// absent. Making a subscription active again makes its pending
	// deliveries due now, with their failure window restarted.
	UpdateSubscription(ctx context.Context, id string, p SubscriptionPatch) (wamux.Subscription, error)
	// DeleteSubscription removes a subscription and its pending
	// deliveries → ENotFound when absent.
	DeleteSubscription(ctx context.Context, id string) error

	// EnqueueDeliveries adds pending deliveries to a subscription and
	// moves its cursor from from to to, in one transaction. When the
	// cursor is no longer from (a replay moved it) nothing is written and
	// it reports false. A delivery already pending is kept as it is.
	EnqueueDeliveries(ctx context.Context, subID, from, to string, ds []Delivery) (bool, error)
	// DueDeliveries returns up to limit pending deliveries of a
	// subscription that are due at now and the first pending one of their
	// order key, by event id, each with its event.
	DueDeliveries(ctx context.Context, subID string, now time.Time, limit int) ([]Delivery, error)
	// SettleDeliveries deletes the delivered ones (done) and stores the
	// new schedule of those to retry, in one transaction.
	SettleDeliveries(ctx context.Context, subID string, done []int64, retry []Delivery) error
	// DeliveryBacklog reports how many deliveries of a subscription are
	// pending and when the oldest one's event was created (zero when none).
	DeliveryBacklog(ctx context.Context, subID string) (int, time.Time, error)
}

// SubscriptionPatch names the fields of a subscription that may change;
// nil fields stay as they are.
type SubscriptionPatch struct {
	URL            *string
	Events         *[]wamux.EventType
	AccountIDs     *[]string
	Description    *string
	State          *wamux.SubscriptionState
	StateReason    *string
	Secret         *string
	OldSecret      *string
	OldSecretUntil *time.Time
	// Cursor moves the subscription's feed position (a replay).
	Cursor *string
}

// Delivery is one event pending delivery to one subscription.
type Delivery struct {
	EventID int64
	// OrderKey names what the event is delivered in order with: its
	// message, or its account for account.state; an inbound message has
	// its own.
	OrderKey string
	Attempts int
	NextAt   time.Time
	// FirstFailedAt is when its first failed attempt ended (zero while
	// none failed).
	FirstFailedAt time.Time
	LastError     string
	// Event is filled by DueDeliveries.
	Event wamux.Event
}

// OrderKey is the key e's deliveries are ordered by (Delivery.OrderKey).
func OrderKey(e wamux.Event) string {
	switch e.Type {
	case wamux.EventMessageStatus:
		return "m:" + e.MsgID
	case wamux.EventAccountState:
		return "a:" + e.AccountID
	}
	return "e:" + strconv.FormatInt(e.ID, 10)
}

// ValidateSubscription is the rule every backend applies before storing a
// subscription.
func ValidateSubscription(s wamux.Subscription) error {
	if s.ID == "" || s.URL == "" || s.Secret == "" {
		return wamux.Errorf(wamux.EInvalid, "subscription needs an id, a url and a secret")
	}
	if !s.State.Valid() {
		return wamux.Errorf(wamux.EInvalid, "unknown subscription state %q", s.State)
	}
	for _, t := range s.Events {
		if !t.Valid() {
			return wamux.Errorf(wamux.EInvalid, "unknown event type %q", t)
		}
	}
	return nil
}

// JoinEventTypes and the helpers beside it encode a subscription's lists
// as the comma-separated text both backends store (event types and
// account ids never contain a comma).
func JoinEventTypes(ts []wamux.EventType) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = string(t)
	}
	return strings.Join(parts, ",")
}

// SplitEventTypes reverses JoinEventTypes.
func SplitEventTypes(s string) []wamux.EventType {
	var out []wamux.EventType
	for _, p := range SplitList(s) {
		out = append(out, wamux.EventType(p))
	}
	return out
}

// SplitList splits comma-separated text; "" is an empty list.
func SplitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// ValidateSubscriptionPatch is ValidateSubscription's rule for the fields a
// patch changes.
func ValidateSubscriptionPatch(p SubscriptionPatch) error {
	if p.State != nil && !p.State.Valid() {
		return wamux.Errorf(wamux.EInvalid, "unknown subscription state %q", *p.State)
	}
	if (p.URL != nil && *p.URL == "") || (p.Secret != nil && *p.Secret == "") {
		return wamux.Errorf(wamux.EInvalid, "a subscription's url and secret cannot be emptied")
	}
	if p.Events != nil {
		for _, t := range *p.Events {
			if !t.Valid() {
				return wamux.Errorf(wamux.EInvalid, "unknown event type %q", t)
			}
		}
	}
	return nil
}

// SubscriptionColumnValues are a patch's fields as the column values both
// backends store; nil where the patch leaves the column.
type SubscriptionColumnValues struct {
	URL, Events, AccountIDs, Description, State, StateReason, Secret, OldSecret, Cursor *string
}

// SubscriptionColumns encodes p for an UPDATE with COALESCE.
func SubscriptionColumns(p SubscriptionPatch) SubscriptionColumnValues {
	c := SubscriptionColumnValues{URL: p.URL, Description: p.Description, StateReason: p.StateReason,
		Secret: p.Secret, OldSecret: p.OldSecret, Cursor: p.Cursor}
	if p.Events != nil {
		v := JoinEventTypes(*p.Events)
		c.Events = &v
	}
	if p.AccountIDs != nil {
		v := strings.Join(*p.AccountIDs, ",")
		c.AccountIDs = &v
	}
	if p.State != nil {
		v := string(*p.State)
		c.State = &v
	}
	return c
}
