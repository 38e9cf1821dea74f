package sim

import (
	"slices"
	"strconv"
	"time"

	"github.com/wamux/wamux/provider/cloudapi"
)

// hookStatus is one status notification waiting for its time.
type hookStatus struct {
	due    time.Time // wall-clock time to send it
	number *number
	status cloudapi.Status
}

// plan draws the statuses an accepted message will produce: sent, then
// delivered and maybe read, or failed; each after a draw from the delay
// range. Faults may reverse their order (timestamps keep the true order,
// as with Meta's concurrent delivery) or duplicate some. The caller holds
// nb.mu, so draws come from the number's seeded source in order. A paced
// message's statuses all move by the hold, timestamps too: Meta sends the
// message only when the hold ends.
func (s *Server) plan(nb *number, m Message) []hookStatus {
	wc, fc := &s.cfg.Webhooks, &nb.faults
	wallNow := time.Now()
	var hold time.Duration
	if m.Paced {
		hold = fc.PacedHold
	}
	var kinds []string
	if nb.chance(wc.FailProbability) {
		kinds = []string{"failed"}
		if nb.chance(wc.FailAfterSentProbability) {
			kinds = []string{"sent", "failed"}
		}
	} else {
		kinds = []string{"sent", "delivered"}
		if nb.chance(wc.ReadProbability) {
			if nb.chance(wc.SkipDeliveredProbability) {
				kinds[1] = "read" // delivered and read at once: no delivered
			} else {
				kinds = append(kinds, "read")
			}
		}
	}
	offsets := make([]time.Duration, len(kinds))
	at := hold
	for i := range kinds {
		at += nb.between(wc.Delay)
		offsets[i] = at
	}
	dues := append([]time.Duration(nil), offsets...)
	reorder := len(kinds) > 1 && nb.chance(fc.WebhookReorder)
	if reorder {
		nb.st.faults["webhook_reorder"]++
		for i, j := 0, len(dues)-1; i < j; i, j = i+1, j-1 {
			dues[i], dues[j] = dues[j], dues[i]
		}
	}
	out := make([]hookStatus, 0, len(kinds)+1)
	for i, k := range kinds {
		st := cloudapi.Status{
			ID: m.WAMID, Status: k, RecipientID: waID(m.To), BizOpaqueCallbackData: m.CallbackData,
			Timestamp: strconv.FormatInt(m.AcceptedAt.Add(offsets[i]).Unix(), 10),
		}
		switch k {
		case "sent", "delivered":
			st.Pricing = pricing(m.Type)
		case "read":
			// Pricing comes with sent and one of delivered or read.
			if kinds[i-1] == "sent" {
				st.Pricing = pricing(m.Type)
			}
		case "failed":
			st.Errors = webhookErrors(wc.FailCode)
		}
		out = append(out, hookStatus{due: wallNow.Add(dues[i]), number: nb, status: st})
		if nb.chance(fc.WebhookDuplicate) {
			nb.st.faults["webhook_duplicate"]++
			out = append(out, hookStatus{due: wallNow.Add(dues[i] + nb.between(wc.Delay)), number: nb, status: st})
		}
	}
	if reorder {
		// Statuses due at the same instant (no delay) leave in the order
		// they are queued: queue them reversed too.
		slices.Reverse(out)
	}
	return out
}

// planReengagement plans the one status of a message sent outside its
// recipient's customer-service window: failed with 131047 ("Re-engagement
// message"), after one draw from the delay range, with no pricing: Meta
// does not deliver it. Such a message is never a template, so never
// paced. The caller holds nb.mu.
func (s *Server) planReengagement(nb *number, m Message) []hookStatus {
	after := nb.between(s.cfg.Webhooks.Delay)
	st := cloudapi.Status{
		ID: m.WAMID, Status: "failed", RecipientID: waID(m.To), BizOpaqueCallbackData: m.CallbackData,
		Timestamp: strconv.FormatInt(m.AcceptedAt.Add(after).Unix(), 10),
		Errors:    webhookErrors(131047),
	}
	return []hookStatus{{due: time.Now().Add(after), number: nb, status: st}}
}

// webhookErrors is a failed status's errors[] for code, in Meta's shape
// (reference §4.4 b): title, message, error_data.details and href.
func webhookErrors(code int) []cloudapi.WebhookError {
	title, details := asyncError(code)
	return []cloudapi.WebhookError{{
		Code: code, Title: title, Message: title,
		ErrorData: &cloudapi.ErrorData{Details: details},
		Href:      "/documentation/business-messaging/whatsapp/support/error-codes",
	}}
}

// pricing is the v24-style pricing block: templates are billed, free-form
// replies fall in the free customer-service window.
func pricing(typ string) *cloudapi.Pricing {
	if typ == "template" {
		return &cloudapi.Pricing{Billable: true, PricingModel: "PMP", Type: "regular", Category: "utility"}
	}
	return &cloudapi.Pricing{Billable: false, PricingModel: "PMP", Type: "free_customer_service", Category: "service"}
}
