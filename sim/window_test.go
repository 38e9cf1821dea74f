package sim_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
)

func template(to string) string {
	b, _ := json.Marshal(map[string]any{"messaging_product": "whatsapp", "to": to, "type": "template",
		"template": map[string]any{"name": "order_update", "language": map[string]any{"code": "en_US"}}})
	return string(b)
}

// finalStatus waits for the statuses of wamid to end (delivered or
// failed) and returns them.
func finalStatus(t *testing.T, rc *hookSink, wamid string) []cloudapi.Status {
	t.Helper()
	var got []cloudapi.Status
	testwait.For(t, "the statuses of "+wamid, 10*time.Second, func() bool {
		got = rc.statusesOf(wamid)
		for _, st := range got {
			if st.Status == "delivered" || st.Status == "failed" {
				return true
			}
		}
		return false
	})
	return got
}

// delivered reports whether statuses hold a delivered and no failed
// (webhooks are posted concurrently, so in any order).
func delivered(sts []cloudapi.Status) bool {
	d := false
	for _, st := range sts {
		if st.Status == "failed" {
			return false
		}
		d = d || st.Status == "delivered"
	}
	return d
}

// TestServiceWindow: with the window enforced, a free-form send to a user
// who has not written within 24 h is accepted (200 with a wamid, as Meta)
// and then fails with 131047 in Meta's async error shape; a user's
// message opens the window for 24 h on the sim's clock; templates always
// pass.
func TestServiceWindow(t *testing.T) {
	rc := newHookSink(t)
	h := start(t, sim.Config{ServiceWindow: true, Webhooks: sim.Webhooks{URL: rc.url, AppSecret: hookSecret}})
	const stranger, customer = "4915100000001", "4915100000002"

	closed := h.sentWAMID(stranger) // 200: the failure comes later
	sts := finalStatus(t, rc, closed)
	if len(sts) != 1 || sts[0].Status != "failed" || len(sts[0].Errors) != 1 || sts[0].Pricing != nil || sts[0].RecipientID != stranger {
		t.Fatalf("statuses of a send outside the window: %+v; want one failed", sts)
	}
	e := sts[0].Errors[0]
	if e.Code != 131047 || e.Title != "Re-engagement message" || e.Message != e.Title || e.ErrorData == nil ||
		e.ErrorData.Details != "Message failed to send because more than 24 hours have passed since the customer last replied to this number." ||
		e.Href != "/documentation/business-messaging/whatsapp/support/error-codes" {
		t.Fatalf("131047 error %+v", e)
	}

	if _, err := h.s.Inbound(num, sim.InboundRequest{From: customer}); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(23 * time.Hour)
	open := h.sentWAMID(customer)
	if sts := finalStatus(t, rc, open); !delivered(sts) {
		t.Fatalf("statuses of a send within the window: %+v", sts)
	}
	code, body, _ := h.send(num, token, template(stranger))
	if code != 200 {
		t.Fatalf("template outside the window: %d %s", code, body)
	}
	var ok struct {
		Messages []struct{ ID string } `json:"messages"`
	}
	json.Unmarshal(body, &ok)
	if sts := finalStatus(t, rc, ok.Messages[0].ID); !delivered(sts) {
		t.Fatalf("statuses of a template outside the window: %+v", sts)
	}

	// 24 h after the customer's message the window has closed again.
	h.clk.Advance(time.Hour)
	late := h.sentWAMID(customer)
	if sts := finalStatus(t, rc, late); sts[0].Status != "failed" || sts[0].Errors[0].Code != 131047 {
		t.Fatalf("statuses 24 h after the customer wrote: %+v", sts)
	}
	st := h.s.Stats()
	if n := st.Numbers[num]; n.WindowClosed != 2 || n.Accepted != 4 || st.Totals.WindowClosed != 2 {
		t.Fatalf("stats: window_closed %d, accepted %d; want 2, 4", n.WindowClosed, n.Accepted)
	}
	var msgs struct{ Messages []sim.Message }
	h.get("/sim/messages?to="+customer, &msgs)
	if len(msgs.Messages) != 2 || msgs.Messages[0].WindowClosed || !msgs.Messages[1].WindowClosed {
		t.Fatalf("records %+v; want the second send to the customer marked window_closed", msgs.Messages)
	}
}

// TestServiceWindowOffByDefault: without ServiceWindow a free-form send to
// someone who never wrote is delivered, as before the window existed.
func TestServiceWindowOffByDefault(t *testing.T) {
	rc := newHookSink(t)
	h := start(t, sim.Config{Webhooks: sim.Webhooks{URL: rc.url, AppSecret: hookSecret}})
	w := h.sentWAMID("4915100000001")
	if sts := finalStatus(t, rc, w); !delivered(sts) {
		t.Fatalf("statuses with the window off: %+v", sts)
	}
	if n := h.s.Stats().Numbers[num].WindowClosed; n != 0 {
		t.Fatalf("window_closed %d with the window off", n)
	}
}
