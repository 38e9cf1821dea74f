package receipts

import (
	"context"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// maxIDLen bounds ids from outside (as the agent does); a wamid is about
// 60 characters.
const maxIDLen = 1024

// maxCallbackChars is Meta's limit on biz_opaque_callback_data, which a
// status echoes: 512 characters (not bytes: a status for a send by
// another app may carry more bytes of non-ASCII text).
const maxCallbackChars = 512

// Normalize checks a receipt from outside and puts it in canonical form
// (trimmed ids, UTC times truncated to the store's millisecond), so the
// same status reported twice yields the same key and the same merge. An
// event_time more than wamux.MaxEventTimeAhead after ReceivedAt is refused;
// without a ReceivedAt it is not compared (Ingest sets it to its clock).
func Normalize(r *wamux.Receipt) error {
	r.MessageID = strings.TrimSpace(r.MessageID)
	r.AccountID = strings.TrimSpace(r.AccountID)
	switch {
	case r.MessageID == "":
		return wamux.Errorf(wamux.EInvalid, "message_id is required")
	case len(r.MessageID) > maxIDLen:
		return wamux.Errorf(wamux.EInvalid, "message_id is longer than %d bytes", maxIDLen)
	case r.AccountID == "":
		return wamux.Errorf(wamux.EInvalid, "account_id is required")
	case len(r.CallbackData) > maxCallbackChars && utf8.RuneCountInString(r.CallbackData) > maxCallbackChars:
		return wamux.Errorf(wamux.EInvalid, "callback data is longer than %d characters", maxCallbackChars)
	}
	if err := checkStorable(textField{"message_id", r.MessageID}, textField{"account_id", r.AccountID},
		textField{"callback data", r.CallbackData}, textField{"recipient", r.Recipient}, textField{"error title", r.ErrorTitle}); err != nil {
		return err
	}
	if _, err := wamux.ParseReceiptType(string(r.Type)); err != nil {
		return err
	}
	if r.EventTime.IsZero() {
		return wamux.Errorf(wamux.EInvalid, "event_time is required")
	}
	if r.EventTime.Unix() <= 0 {
		return wamux.Errorf(wamux.EInvalid, "event_time is before 1970-01-01T00:00:01Z")
	}
	if r.EventTime.Year() > 9999 {
		return wamux.Errorf(wamux.EInvalid, "event_time is out of range")
	}
	if !r.ReceivedAt.IsZero() && r.EventTime.Sub(r.ReceivedAt) > wamux.MaxEventTimeAhead {
		return wamux.Errorf(wamux.EInvalid, "event_time %s is more than %s ahead of the gateway's clock (%s)",
			r.EventTime.UTC().Format(time.RFC3339), fmtAhead(wamux.MaxEventTimeAhead), r.ReceivedAt.UTC().Format(time.RFC3339))
	}
	r.EventTime = time.UnixMilli(r.EventTime.UnixMilli()).UTC()
	if !r.ReceivedAt.IsZero() {
		r.ReceivedAt = time.UnixMilli(r.ReceivedAt.UnixMilli()).UTC()
	}
	return nil
}

// fmtAhead writes a whole number of minutes as "15 minutes".
func fmtAhead(d time.Duration) string {
	return strconv.Itoa(int(d/time.Minute)) + " minutes"
}

// NormalizeInbound checks an inbound message from outside as Normalize
// does a receipt: an id no store can key (empty, longer than maxIDLen, a
// NUL byte or invalid UTF-8; PostgreSQL refuses the last two, and its
// primary-key index a very long id) or a type it cannot hold would fail
// the whole write every time it is delivered again.
func NormalizeInbound(m *store.InboundMessage) error {
	m.WAMID = strings.TrimSpace(m.WAMID)
	switch {
	case m.WAMID == "":
		return wamux.Errorf(wamux.EInvalid, "inbound message without an id")
	case len(m.WAMID) > maxIDLen:
		return wamux.Errorf(wamux.EInvalid, "inbound message id is longer than %d bytes", maxIDLen)
	case len(m.Type) > maxIDLen:
		return wamux.Errorf(wamux.EInvalid, "inbound message type is longer than %d bytes", maxIDLen)
	}
	return checkStorable(textField{"inbound message id", m.WAMID}, textField{"inbound message type", m.Type})
}

// textField is a string from outside and its name in an error.
type textField struct{ name, v string }

// checkStorable refuses a NUL byte or invalid UTF-8 in any of fields:
// PostgreSQL's text holds neither, so the store would refuse the input
// after it was accepted, and every redelivery of it again.
func checkStorable(fields ...textField) error {
	for _, f := range fields {
		if strings.IndexByte(f.v, 0) >= 0 || !utf8.ValidString(f.v) {
			return wamux.Errorf(wamux.EInvalid, "%s holds a NUL byte or invalid UTF-8", f.name)
		}
	}
	return nil
}

// DeadLetter keeps input that cannot be processed, with why; reason is a
// short fixed name (the metric label), d.Reason the full text.
func (p *Pipeline) DeadLetter(ctx context.Context, reason string, ds []store.DeadLetter) error {
	return p.deadLetter(ctx, reason, ds)
}

func (p *Pipeline) deadLetter(ctx context.Context, reason string, ds []store.DeadLetter) error {
	if len(ds) == 0 {
		return nil
	}
	if err := p.retry(ctx, "add dead letters", func(ctx context.Context) error { return p.st.AddDeadLetters(ctx, ds) }); err != nil {
		return err
	}
	p.c.dead.Add(int64(len(ds)))
	p.m.failures.WithLabelValues("poison").Add(float64(len(ds)))
	for _, d := range ds {
		p.m.deadLetters.WithLabelValues(d.Source, reason).Inc()
	}
	return nil
}

// AddInbound keeps the minimal record of inbound messages and counts the
// new ones: Meta redelivers a notification it was not sure we took, and a
// redelivered message is neither stored nor counted again. One store call
// per account, so that the count is per account (a notification almost
// always carries one). The new ones that are recent are then charged to
// the account's send rate (Config.OnInbound); the store says how many of
// a call's messages were new, not which, so an account's recent and older
// messages go in separate calls when a notification mixes them.
func (p *Pipeline) AddInbound(ctx context.Context, ms []store.InboundMessage) error {
	now := p.now()
	for len(ms) > 0 {
		account := ms[0].AccountID
		var recent, older, rest []store.InboundMessage
		for _, m := range ms {
			switch {
			case m.AccountID != account:
				rest = append(rest, m)
			case p.cfg.OnInbound != nil && chargeable(m, now):
				recent = append(recent, m)
			default:
				older = append(older, m)
			}
		}
		added, err := p.addInbound(ctx, account, recent)
		if err != nil {
			return err
		}
		// Charged before anything else can fail: a redelivery of these
		// would not be new, nor charged, again.
		p.chargeInbound(ctx, account, added)
		if _, err := p.addInbound(ctx, account, older); err != nil {
			return err
		}
		ms = rest
	}
	return nil
}

// addInbound stores one account's messages and counts the new ones.
func (p *Pipeline) addInbound(ctx context.Context, account string, ms []store.InboundMessage) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	var added int
	if err := p.retry(ctx, "add inbound messages", func(ctx context.Context) error {
		var err error
		added, err = p.st.AddInboundMessages(ctx, ms)
		return err
	}); err != nil {
		return 0, err
	}
	p.m.inbound.WithLabelValues(account).Add(float64(added))
	return added, nil
}

// chargeable reports whether Meta counted m against the number's
// throughput recently enough to matter (InboundChargeWindow).
func chargeable(m store.InboundMessage, now time.Time) bool {
	age := now.Sub(m.SentAt)
	return !m.SentAt.IsZero() && age < InboundChargeWindow && age > -InboundChargeWindow
}

// chargeInbound hands the account's n new recent messages to OnInbound.
func (p *Pipeline) chargeInbound(ctx context.Context, account string, n int) {
	if p.cfg.OnInbound == nil || n == 0 {
		return
	}
	if err := p.cfg.OnInbound(ctx, account, n); err != nil {
		p.log.Warn("charge inbound messages to the send rate", "account_id", account, "count", n, "err", err)
		return
	}
	p.m.inboundCharged.WithLabelValues(account).Add(float64(n))
}
