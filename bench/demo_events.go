package bench

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/wamux/wamux/provider/cloudapi"
)

// operatorEvents are the webhook notifications Meta sends now and then that
// the simulator's status stream does not: a customer's inbound message, a
// status for a phone number the gateway does not serve (a dead letter), and
// a stronger status that arrives long after a weaker one with an older
// timestamp (the late-receipt audit). The demo posts one every five
// seconds so these counters move on the dashboard too, and a copy signed
// under another secret, which the gateway refuses.
type operatorEvents struct {
	pnid  string
	due   time.Time
	round int
	// pending is the failed status of the previous round, whose late,
	// older "delivered" the next round sends.
	pending *cloudapi.Status
}

func newOperatorEvents(pnid string) *operatorEvents {
	return &operatorEvents{pnid: pnid, due: time.Now().Add(2 * time.Second)}
}

// next returns the notification due at now, if any.
func (e *operatorEvents) next(now time.Time) ([]byte, bool) {
	if now.Before(e.due) {
		return nil, false
	}
	e.due = now.Add(5 * time.Second)
	e.round++
	ts := func(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
	known := cloudapi.Value{
		MessagingProduct: "whatsapp",
		Metadata:         cloudapi.Metadata{DisplayPhoneNumber: "15550000404", PhoneNumberID: e.pnid},
		Messages: []cloudapi.InboundMessage{{From: "4915112345678", ID: fmt.Sprintf("wamid.demo-in-%d", e.round),
			Timestamp: ts(now), Type: "text", Text: &cloudapi.InboundText{Body: "is my order on its way?"}}},
	}
	if e.pending != nil {
		// The same message's delivered, stamped before the failed that
		// was merged five seconds ago: stronger but out of order and past
		// the late window, so it goes to the audit table.
		late := *e.pending
		late.Status, late.Errors = "delivered", nil
		old, _ := strconv.ParseInt(e.pending.Timestamp, 10, 64)
		late.Timestamp = strconv.FormatInt(old-10, 10)
		known.Statuses = append(known.Statuses, late)
	}
	failed := cloudapi.Status{ID: fmt.Sprintf("wamid.demo-late-%d", e.round), Status: "failed", Timestamp: ts(now),
		RecipientID: "4915112345678", Errors: []cloudapi.WebhookError{{Code: 131026, Title: "Message undeliverable"}}}
	known.Statuses = append(known.Statuses, failed)
	e.pending = &failed
	unknown := cloudapi.Value{
		MessagingProduct: "whatsapp",
		Metadata:         cloudapi.Metadata{DisplayPhoneNumber: "15550000999", PhoneNumberID: "999000999000"},
		Statuses: []cloudapi.Status{{ID: fmt.Sprintf("wamid.demo-stray-%d", e.round), Status: "sent", Timestamp: ts(now),
			RecipientID: "4915112345678"}},
	}
	body, err := json.Marshal(cloudapi.Webhook{Object: "whatsapp_business_account", Entry: []cloudapi.Entry{
		{ID: "demo-waba", Changes: []cloudapi.Change{{Field: "messages", Value: known}}},
		{ID: "other-waba", Changes: []cloudapi.Change{{Field: "messages", Value: unknown}}},
	}})
	if err != nil {
		return nil, false
	}
	return body, true
}
