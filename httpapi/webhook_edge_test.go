package httpapi_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/store"
)

// deadLettersNaming counts the webhook's invalid_status dead letters whose
// payload names each of ids, and fails on any other dead letter.
func deadLettersNaming(t *testing.T, b *receiptBundle, ids ...string) map[string]int {
	t.Helper()
	dead, err := b.store.ListDeadLetters(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, d := range dead {
		named := false
		for _, id := range ids {
			if strings.Contains(string(d.Payload), id) {
				got[id]++
				named = true
			}
		}
		if !named || d.Source != "webhook" || d.AccountID != "acc1" {
			t.Errorf("dead letter %+v %s: want one of %v of acc1 from the webhook", d, d.Payload, ids)
		}
	}
	return got
}

// TestWebhookStatusFromTheFutureIsDeadLettered: a status stamped further
// ahead of the gateway's clock than wamux.MaxEventTimeAhead (a year
// 2100, or one hour) is a counted invalid_status dead letter naming the
// bound, the notification is still answered 200, and the statuses beside
// it are kept; one within the bound is taken.
func TestWebhookStatusFromTheFutureIsDeadLettered(t *testing.T) {
	b := newReceiptBundle(t)
	now := time.Now()
	ts := func(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
	body := envelope(phoneID,
		status{ID: "wamid.NOW", Status: "sent", Timestamp: ts(now)},
		status{ID: "wamid.SKEWED", Status: "delivered", Timestamp: ts(now.Add(wamux.MaxEventTimeAhead - time.Minute))},
		status{ID: "wamid.HOUR", Status: "delivered", Timestamp: ts(now.Add(time.Hour))},
		status{ID: "wamid.2100", Status: "read", Timestamp: "4102444800"})
	r := b.webhook(t, body, cloudapi.Sign(body, appSecret))
	if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"inbound":0,"receipts":2}` {
		t.Fatalf("webhook = %d %s, want 200 with two receipts", r.status, r.body)
	}
	b.flush(t)
	keys := []store.StateKey{{AccountID: "acc1", MessageID: "wamid.NOW"}, {AccountID: "acc1", MessageID: "wamid.SKEWED"},
		{AccountID: "acc1", MessageID: "wamid.HOUR"}, {AccountID: "acc1", MessageID: "wamid.2100"}}
	states, err := b.store.GetStates(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	if states[keys[0]].Type != wamux.ReceiptSent || states[keys[1]].Type != wamux.ReceiptDelivered {
		t.Errorf("states %+v: want wamid.NOW sent and wamid.SKEWED delivered", states)
	}
	if _, ok := states[keys[2]]; ok {
		t.Errorf("a status an hour ahead was merged: %+v", states[keys[2]])
	}
	if _, ok := states[keys[3]]; ok {
		t.Errorf("a status of 2100 was merged: %+v", states[keys[3]])
	}
	if got := deadLettersNaming(t, b, "wamid.HOUR", "wamid.2100"); got["wamid.HOUR"] != 1 || got["wamid.2100"] != 1 {
		t.Errorf("dead letters name %v, want wamid.HOUR and wamid.2100 once each", got)
	}
	dead, _ := b.store.ListDeadLetters(context.Background(), 10)
	for _, d := range dead {
		if !strings.Contains(d.Reason, "ahead of the gateway's clock") {
			t.Errorf("dead letter reason %q does not say the time is ahead of the clock", d.Reason)
		}
	}
	metrics := b.do(t, http.MethodGet, "/metrics", "", nil)
	if m := `wamux_dead_letters_total{reason="invalid_status",source="webhook"} 2`; !strings.Contains(string(metrics.body), m) {
		t.Errorf("metrics lack %s", m)
	}
}
