package store

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/wamux/wamux"
)

// InboundStore reads what customers wrote and lets it expire.
type InboundStore interface {
	// ListInbound returns up to f.Limit inbound messages of an account
	// (of one customer when f.From is set), newest first by the time the
	// customer sent them (then by wamid, descending), and the cursor of
	// the next page ("" when there is none). The order is stable: a
	// message stored after a page was read appears on later pages only if
	// it sorts after the page's last one.
	ListInbound(ctx context.Context, f InboundFilter) ([]InboundMessage, string, error)
	// GetInbound returns an account's inbound message → ENotFound.
	GetInbound(ctx context.Context, accountID, wamid string) (InboundMessage, error)
	// LastInbound returns when the customer from last sent a stored
	// message to the account (the newest SentAt); zero when none is
	// stored. An empty accountID means the customer's owner account
	// (GetOwner), in the same query; zero when it has none.
	LastInbound(ctx context.Context, accountID, from string) (time.Time, error)
	// PruneInbound deletes up to limit inbound messages received before
	// t, oldest first, and reports how many went. Their events stay (the
	// outbox has its own retention).
	PruneInbound(ctx context.Context, before time.Time, limit int) (int, error)
}

// InboundFilter selects inbound messages for ListInbound.
type InboundFilter struct {
	AccountID string // required
	From      string // the customer's WhatsApp id; "" for every customer
	After     string // a cursor ListInbound returned; "" starts at the newest
	Limit     int    // 0 means ListLimitDefault
}

// InboundCursor is a position in ListInbound's order: the last message
// listed. Its text form is opaque to clients.
type InboundCursor struct {
	SentAt int64 // Unix milliseconds, as stored
	WAMID  string
}

// String is the cursor's text form.
func (c InboundCursor) String() string {
	return strconv.FormatInt(c.SentAt, 10) + "." + base64.RawURLEncoding.EncodeToString([]byte(c.WAMID))
}

// ParseInboundCursor reads a cursor's text form; "" is the start (ok
// false); anything else that is not a cursor → EInvalid.
func ParseInboundCursor(s string) (c InboundCursor, ok bool, err error) {
	if s == "" {
		return InboundCursor{}, false, nil
	}
	ms, id, found := strings.Cut(s, ".")
	sent, perr := strconv.ParseInt(ms, 10, 64)
	wamid, derr := base64.RawURLEncoding.DecodeString(id)
	if !found || perr != nil || derr != nil || len(wamid) == 0 {
		return InboundCursor{}, false, wamux.Errorf(wamux.EInvalid, "after is not a cursor of this list")
	}
	return InboundCursor{SentAt: sent, WAMID: string(wamid)}, true, nil
}

// ValidateInboundFilter is every implementation's check of f.
func ValidateInboundFilter(f InboundFilter) error {
	if f.AccountID == "" {
		return wamux.Errorf(wamux.EInvalid, "listing inbound messages needs an account_id")
	}
	_, _, err := ParseInboundCursor(f.After)
	return err
}
