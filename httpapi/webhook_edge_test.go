package httpapi_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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

// TestWebhookStatusNotUTF8IsDeadLettered: a status whose id holds bytes
// that are not UTF-8 (which a JSON decoder would read as U+FFFD, another
// id than the one sent) is a counted invalid_status dead letter, like one
// the agent endpoint refuses; the statuses and inbound message beside it
// are kept and the notification answered 200. The dead letter is UTF-8,
// which PostgreSQL requires.
func TestWebhookStatusNotUTF8IsDeadLettered(t *testing.T) {
	b := newReceiptBundle(t)
	body := []byte(value(`"statuses":[{"id":"wamid.OK","status":"sent","timestamp":"1750030073","recipient_id":"16505551234"},
		{"id":"wamid.BAD` + "\xff\xfe" + `","status":"delivered","timestamp":"1750030074","recipient_id":"16505551234"}],
		"messages":[{"from":"16505551234","id":"wamid.IN","timestamp":"1750030100","type":"text","text":{"body":"hi"}}]`))
	r := b.webhook(t, body, cloudapi.Sign(body, appSecret))
	if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"inbound":1,"receipts":1}` {
		t.Fatalf("webhook = %d %s, want 200 with one inbound and one receipt", r.status, r.body)
	}
	b.flush(t)
	ctx := context.Background()
	key := store.StateKey{AccountID: "acc1", MessageID: "wamid.OK"}
	states, err := b.store.GetStates(ctx, []store.StateKey{key})
	if err != nil || states[key].Type != wamux.ReceiptSent {
		t.Errorf("wamid.OK state %+v (%v), want sent", states, err)
	}
	if got := deadLettersNaming(t, b, "wamid.BAD"); got["wamid.BAD"] != 1 {
		t.Fatalf("dead letters name %v, want wamid.BAD once", got)
	}
	dead, _ := b.store.ListDeadLetters(ctx, 10)
	if d := dead[0]; !strings.Contains(d.Reason, "UTF-8") || !utf8.Valid(d.Payload) || !strings.Contains(string(d.Payload), "wamid.BAD\uFFFD") {
		t.Errorf("dead letter %q %q: want a reason naming UTF-8 and a UTF-8 payload with the id as U+FFFD", d.Reason, d.Payload)
	}
	metrics := b.do(t, http.MethodGet, "/metrics", "", nil)
	if m := `wamux_dead_letters_total{reason="invalid_status",source="webhook"} 1`; !strings.Contains(string(metrics.body), m) {
		t.Errorf("metrics lack %s", m)
	}
}
