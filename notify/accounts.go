package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
)

// AccountsTopic is the topic on which a node announces that an account
// changed (created, its credentials or limits updated, removed), so that
// every node drops what it holds of the account and reads it again from
// the store.
const AccountsTopic = "accounts"

// accountChange is the whole message: which account. What changed, and
// every secret, stays in the store.
type accountChange struct {
	AccountID string `json:"account_id"`
}

// AccountChanges announces account changes to every node and tells a
// node of them.
type AccountChanges struct {
	n   Notifier
	log *slog.Logger
}

// NewAccountChanges carries account changes on n; log (none when nil)
// reports malformed announcements.
func NewAccountChanges(n Notifier, log *slog.Logger) *AccountChanges {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &AccountChanges{n: n, log: log}
}

// Announce tells every node, this one included, that the account changed.
// Call it after the change is stored.
func (a *AccountChanges) Announce(ctx context.Context, accountID string) error {
	if accountID == "" {
		return errors.New("notify: announce an account change: no account id")
	}
	msg, err := json.Marshal(accountChange{AccountID: accountID})
	if err != nil {
		return fmt.Errorf("notify: announce a change of account %s: %w", accountID, err)
	}
	if err := a.n.Publish(ctx, AccountsTopic, msg); err != nil {
		return fmt.Errorf("notify: announce a change of account %s: %w", accountID, err)
	}
	return nil
}

// Subscribe calls changed with the id of each account announced from
// now until stop, one call at a time. Announcements are at most once:
// when the Notifier is Resuming, resumed (if not nil) is called each time
// the subscription is made again after a break, when any account may
// have changed unannounced.
func (a *AccountChanges) Subscribe(ctx context.Context, changed func(accountID string), resumed func()) (stop func(), err error) {
	fn := func(payload []byte) {
		var c accountChange
		if err := json.Unmarshal(payload, &c); err != nil || c.AccountID == "" {
			a.log.Warn("ignoring a malformed account change announcement", "err", err)
			return
		}
		changed(c.AccountID)
	}
	if r, ok := a.n.(Resuming); ok && resumed != nil {
		stop, err = r.SubscribeResuming(ctx, AccountsTopic, fn, resumed)
	} else {
		stop, err = a.n.Subscribe(ctx, AccountsTopic, fn)
	}
	if err != nil {
		return nil, fmt.Errorf("notify: subscribe to account changes: %w", err)
	}
	return stop, nil
}
