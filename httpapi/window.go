package httpapi

import (
	"context"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/settings"
)

// ServiceWindow is how long after a customer's message Meta lets a
// business send it messages other than templates.
const ServiceWindow = 24 * time.Hour

// windowKey is a customer of an account ("" for the customer's owner).
type windowKey struct{ account, customer string }

// windowCheck refuses messages other than templates to customers whose
// service window has closed, by the customers' last stored messages; one
// store query per customer and account it is asked about.
type windowCheck struct {
	s    *Server
	now  time.Time
	last map[windowKey]time.Time
}

// windowCheck returns a check for the messages of one request, or nil
// when the service_window setting is off.
func (s *Server) windowCheck(now time.Time) *windowCheck {
	mode := settings.Defaults().ServiceWindow
	if s.settings != nil {
		mode = s.settings.Current().ServiceWindow
	}
	if mode == settings.ServiceWindowOff {
		return nil
	}
	return &windowCheck{s: s, now: now, last: map[windowKey]time.Time{}}
}

// refuse returns the outside_service_window error for m when its account
// (the given one, else the customer's owner) has stored messages from the
// customer and the newest is older than ServiceWindow. A customer without
// a stored message is not refused: its window may have opened before the
// gateway kept inbound messages, or elsewhere, and the provider decides.
func (c *windowCheck) refuse(ctx context.Context, m wamux.Message) error {
	if c == nil || m.Type == "template" {
		return nil
	}
	k := windowKey{m.AccountID, m.To}
	last, ok := c.last[k]
	if !ok {
		var err error
		if last, err = c.s.store.LastInbound(ctx, m.AccountID, m.To); err != nil {
			return err
		}
		c.last[k] = last
	}
	if last.IsZero() {
		return nil
	}
	if end := last.Add(ServiceWindow); !c.now.Before(end) {
		return wamux.Errorf(wamux.EOutsideWindow,
			"the customer service window ended at %s (24 h after the customer's last message): only a template can be sent until the customer writes again",
			end.UTC().Format(time.RFC3339))
	}
	return nil
}
