package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/postgres/pgtest"
	"github.com/wamux/wamux/store/sqlite"
)

// Payload shapes of reference §4 (statuses, inbound, async errors), the
// verbatim samples first, fed signed through the real handler into the
// real pipeline and SQLite store.

// refSent is sample (a): sent, v≤23 style with conversation and pricing.
const refSent = `{
  "object": "whatsapp_business_account",
  "entry": [{
    "id": "102290129340398",
    "changes": [{
      "value": {
        "messaging_product": "whatsapp",
        "metadata": { "display_phone_number": "15550783881", "phone_number_id": "106540352242922" },
        "statuses": [{
          "id": "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUFERjg0NDEzNDdFODU3MUMxMAA=",
          "status": "sent",
          "timestamp": "1750030073",
          "recipient_id": "16505551234",
          "conversation": {
            "id": "72b14d6bd5407799e66f64d1b338e567",
            "expiration_timestamp": "1750116480",
            "origin": { "type": "marketing" }
          },
          "pricing": { "billable": true, "pricing_model": "PMP", "type": "regular", "category": "marketing" }
        }]
      },
      "field": "messages"
    }]
  }]
}`

// refFailed is sample (b): failed with errors[] (async 131049).
const refFailed = `{
  "object": "whatsapp_business_account",
  "entry": [{
    "id": "102290129340398",
    "changes": [{
      "value": {
        "messaging_product": "whatsapp",
        "metadata": { "display_phone_number": "15550783881", "phone_number_id": "106540352242922" },
        "statuses": [{
          "id": "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI0QUQ2MjA4NEYyRkExNjMyREUA",
          "status": "failed",
          "timestamp": "1751142888",
          "recipient_id": "16505551234",
          "errors": [{
            "code": 131049,
            "title": "This message was not delivered to maintain healthy ecosystem engagement.",
            "message": "This message was not delivered to maintain healthy ecosystem engagement.",
            "error_data": { "details": "In order to maintain a healthy ecosystem engagement, the message failed to be delivered." },
            "href": "/documentation/business-messaging/whatsapp/support/error-codes"
          }]
        }]
      },
      "field": "messages"
    }]
  }]
}`

// refTwo is sample (c): delivered and read of two messages, v24 style.
const refTwo = `{
  "object": "whatsapp_business_account",
  "entry": [{
    "id": "102290129340398",
    "changes": [{
      "value": {
        "messaging_product": "whatsapp",
        "metadata": { "display_phone_number": "15550783881", "phone_number_id": "106540352242922" },
        "statuses": [
          { "id": "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJCNkY5NTBENEU3ODYxQTM3RUQA",
            "status": "delivered", "timestamp": "1750030075", "recipient_id": "16505551234",
            "biz_opaque_callback_data": "gw:acct42:msg:7f3c9a0e",
            "pricing": { "billable": true, "pricing_model": "PMP", "type": "regular", "category": "utility" } },
          { "id": "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI5QTNCMjQ4NkY5QTJEMUUwMQA=",
            "status": "read", "timestamp": "1750030081", "recipient_id": "16505557777" }
        ]
      },
      "field": "messages"
    }]
  }]
}`

// value wraps the inside of one "messages" value of phoneID.
func value(inner string) string {
	return `{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"field":"messages","value":{
		"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"` + phoneID + `"},` + inner + `}}]}]}`
}

type wantState struct {
	typ   wamux.ReceiptType
	code  int
	title string // of the receipt of that type, when set
	cb    string // callback data of the receipt of that type, when set
}

type wantDead struct {
	reason  string   // label-ish: a substring of the dead letter's reason
	payload []string // substrings of its payload
}

func TestWebhookReferenceShapes(t *testing.T) {
	cases := []struct {
		name     string
		body     string
		answer   string // the 200 body
		states   map[string]wantState
		inbound  []string
		dead     []wantDead
		deadNone bool
	}{
		{name: "(a) sent with conversation and pricing (v23)", body: refSent, answer: `{"inbound":0,"receipts":1}`,
			states: map[string]wantState{"wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUFERjg0NDEzNDdFODU3MUMxMAA=": {typ: wamux.ReceiptSent}}},
		{name: "(b) failed with errors[]", body: refFailed, answer: `{"inbound":0,"receipts":1}`,
			states: map[string]wantState{"wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI0QUQ2MjA4NEYyRkExNjMyREUA": {typ: wamux.ReceiptFailed, code: 131049,
				title: "This message was not delivered to maintain healthy ecosystem engagement."}}},
		{name: "(c) delivered and read of two messages (v24)", body: refTwo, answer: `{"inbound":0,"receipts":2}`,
			states: map[string]wantState{
				"wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJCNkY5NTBENEU3ODYxQTM3RUQA": {typ: wamux.ReceiptDelivered, cb: "gw:acct42:msg:7f3c9a0e"},
				"wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI5QTNCMjQ4NkY5QTJEMUUwMQA=": {typ: wamux.ReceiptRead}}},
		{name: "delivered with conversation without expiration, CBP (v23)", answer: `{"inbound":0,"receipts":1}`,
			body: value(`"statuses":[{"id":"wamid.OLD","status":"delivered","timestamp":"1750857384","recipient_id":"5516992318222",
				"conversation":{"id":"a75d17ad06104c51166f948319b03c6a","origin":{"type":"service"}},
				"pricing":{"billable":true,"pricing_model":"CBP","category":"service"}}]`),
			states: map[string]wantState{"wamid.OLD": {typ: wamux.ReceiptDelivered}}},
		{name: "sent of a free entry point conversation (v24)", answer: `{"inbound":0,"receipts":1}`,
			body: value(`"statuses":[{"id":"wamid.FEP","status":"sent","timestamp":"1750030073","recipient_id":"16505551234",
				"conversation":{"id":"c1","expiration_timestamp":"1750289273","origin":{"type":"referral_conversion"}},
				"pricing":{"billable":false,"pricing_model":"PMP","type":"free_entry_point","category":"referral_conversion"}}]`),
			states: map[string]wantState{"wamid.FEP": {typ: wamux.ReceiptSent}}},
		{name: "group recipient", answer: `{"inbound":0,"receipts":2}`,
			body: value(`"statuses":[{"id":"wamid.G","status":"delivered","timestamp":"1750030075","recipient_id":"120363025246125486@g.us",
				"recipient_type":"group","recipient_participant_id":"16505551234"},
				{"id":"wamid.G","status":"read","timestamp":"1750030080","recipient_id":"120363025246125486@g.us",
				"recipient_type":"group","recipient_participant_id":"16505557777"}]`),
			states: map[string]wantState{"wamid.G": {typ: wamux.ReceiptRead}}},
		{name: "failed without errors[] and with a code only", answer: `{"inbound":0,"receipts":2}`,
			body: value(`"statuses":[{"id":"wamid.F0","status":"failed","timestamp":"1750030075","recipient_id":"16505551234"},
				{"id":"wamid.F1","status":"failed","timestamp":"1750030075","recipient_id":"16505551234","errors":[{"code":131026}]}]`),
			states: map[string]wantState{"wamid.F0": {typ: wamux.ReceiptFailed}, "wamid.F1": {typ: wamux.ReceiptFailed, code: 131026}}},
		{name: "played is ignored", answer: `{"inbound":0,"receipts":0}`, deadNone: true,
			body: value(`"statuses":[{"id":"wamid.P","status":"played","timestamp":"1750030075","recipient_id":"16505551234"}]`)},
		{name: "status values the gateway does not track are dead-lettered, not lost", answer: `{"inbound":0,"receipts":1}`,
			body: value(`"statuses":[{"id":"wamid.D","status":"deleted","timestamp":"1750030075","recipient_id":"16505551234"},
				{"id":"wamid.W","status":"warning","timestamp":"1750030075","recipient_id":"16505551234"},
				{"id":"wamid.H","status":"held_for_quality_assessment","timestamp":"1750030075","recipient_id":"16505551234"},
				{"id":"wamid.OK","status":"sent","timestamp":"1750030075","recipient_id":"16505551234"}]`),
			states: map[string]wantState{"wamid.OK": {typ: wamux.ReceiptSent}},
			dead: []wantDead{{"status could not be read", []string{"wamid.D", "deleted"}},
				{"status could not be read", []string{"wamid.W", "warning"}},
				{"status could not be read", []string{"wamid.H", "held_for_quality_assessment"}}}},
		{name: "top-level value.errors[]", answer: `{"inbound":0,"receipts":0}`,
			body: value(`"errors":[{"code":131000,"title":"Something went wrong","message":"Something went wrong",
				"error_data":{"details":"Message failed to send due to an unknown error."},"href":"/documentation/business-messaging/whatsapp/support/error-codes"}]`),
			dead: []wantDead{{"code 131000: Something went wrong", []string{"131000", "unknown error"}}}},
		{name: "statuses and top-level errors in one value", answer: `{"inbound":0,"receipts":1}`,
			body: value(`"statuses":[{"id":"wamid.SE","status":"sent","timestamp":"1750030075","recipient_id":"16505551234"}],
				"errors":[{"code":131016,"title":"Service unavailable"}]`),
			states: map[string]wantState{"wamid.SE": {typ: wamux.ReceiptSent}},
			dead:   []wantDead{{"code 131016: Service unavailable", []string{"131016"}}}},
		{name: "inbound text with contacts", answer: `{"inbound":1,"receipts":0}`,
			body: value(`"contacts":[{"profile":{"name":"Kerry Fisher"},"wa_id":"16315551234"}],
				"messages":[{"from":"16315551234","id":"wamid.IN","timestamp":"1750030100","type":"text","text":{"body":"Does it come in another color?"}}]`),
			inbound: []string{"wamid.IN"}, deadNone: true},
		{name: "inbound of other types (interactive, unsupported with errors, reaction)", answer: `{"inbound":3,"receipts":0}`,
			body: value(`"contacts":[{"profile":{"name":"Kerry"},"wa_id":"16315551234"}],
				"messages":[{"from":"16315551234","id":"wamid.I1","timestamp":"1750030100","type":"interactive",
					"interactive":{"type":"button_reply","button_reply":{"id":"b1","title":"Yes"}},"context":{"from":"15550783881","id":"wamid.X"}},
				{"from":"16315551234","id":"wamid.I2","timestamp":"1750030101","type":"unsupported",
					"errors":[{"code":131051,"title":"Message type unknown","message":"Message type unknown","error_data":{"details":"Message type is currently not supported."}}]},
				{"from":"16315551234","id":"wamid.I3","timestamp":"1750030102","type":"reaction","reaction":{"message_id":"wamid.X","emoji":"👍"}}]`),
			inbound: []string{"wamid.I1", "wamid.I2", "wamid.I3"}, deadNone: true},
		{name: "unknown fields at every level", answer: `{"inbound":1,"receipts":1}`,
			body: `{"object":"whatsapp_business_account","future":[1,{"a":null}],"entry":[{"id":"1","time":1750030100,"changes":[{"field":"messages","extra":true,
				"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"` + phoneID + `","x":{}},
				"statuses":[{"id":"wamid.U","status":"delivered","timestamp":"1750030075","recipient_id":"16505551234",
					"recipient_identity_key_hash":"abc","recipient_user_id":"US.123","new":{"deep":[1,2]},
					"pricing":{"billable":true,"pricing_model":"PMP","type":"regular","category":"utility","extra":1}}],
				"contacts":[{"profile":{"name":"K","x":1},"wa_id":"16315551234","user_id":"US.123"}],
				"messages":[{"from":"16315551234","id":"wamid.UI","timestamp":"1750030100","type":"text","text":{"body":"hi","x":1},"y":[]}],
				"unknown_list":[{"id":1}]}}]}]}`,
			states:  map[string]wantState{"wamid.U": {typ: wamux.ReceiptDelivered}},
			inbound: []string{"wamid.UI"}, deadNone: true},
		{name: "several entries and changes, other fields among them", answer: `{"inbound":1,"receipts":3}`,
			body: `{"object":"whatsapp_business_account","entry":[
				{"id":"102290129340398","changes":[
					{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":"` + phoneID + `"},
						"statuses":[{"id":"wamid.M1","status":"sent","timestamp":"1750030073","recipient_id":"1"}]}},
					{"field":"message_template_status_update","value":{"event":"APPROVED","message_template_id":12345,
						"message_template_name":"order_update","message_template_language":"en_US","reason":null}},
					{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":"` + phoneID + `"},
						"statuses":[{"id":"wamid.M1","status":"delivered","timestamp":"1750030075","recipient_id":"1"}]}}]},
				{"id":"102290129340399","changes":[
					{"field":"account_update","value":{"phone_number":"15550783881","event":"ACCOUNT_VIOLATION",
						"violation_info":{"violation_type":"SCAM"}}},
					{"field":"phone_number_quality_update","value":{"display_phone_number":"15550783881","event":"THROUGHPUT_UPGRADE","current_limit":"TIER_UNLIMITED"}},
					{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":"` + phoneID + `"},
						"statuses":[{"id":"wamid.M2","status":"read","timestamp":"1750030080","recipient_id":"2"}],
						"messages":[{"from":"2","id":"wamid.MI","timestamp":"1750030090","type":"text","text":{"body":"ok"}}]}}]}]}`,
			states:  map[string]wantState{"wamid.M1": {typ: wamux.ReceiptDelivered}, "wamid.M2": {typ: wamux.ReceiptRead}},
			inbound: []string{"wamid.MI"}, deadNone: true},
		{name: "an unknown number's statuses and errors beside a known one are dead-lettered", answer: `{"inbound":0,"receipts":1}`,
			body: `{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[
				{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":"` + phoneID + `"},
					"statuses":[{"id":"wamid.K","status":"sent","timestamp":"1750030073","recipient_id":"1"}]}},
				{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":"777"},
					"statuses":[{"id":"wamid.UNK","status":"failed","timestamp":"1750030073","recipient_id":"1",
						"errors":[{"code":131026,"title":"Message undeliverable"}]}],
					"errors":[{"code":131000,"title":"Something went wrong"}]}}]}]}`,
			states: map[string]wantState{"wamid.K": {typ: wamux.ReceiptSent}},
			dead: []wantDead{{"no account has phone_number_id 777",
				[]string{"wamid.UNK", "131026", "Message undeliverable", "131000", "Something went wrong"}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newReceiptBundle(t)
			ctx := context.Background()
			body := []byte(c.body)
			r := b.webhook(t, body, cloudapi.Sign(body, appSecret))
			if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != c.answer {
				t.Fatalf("answer %d %s, want 200 %s", r.status, r.body, c.answer)
			}
			// Meta redelivers: the same again changes nothing stored but
			// dead letters (each delivery is one).
			if r := b.webhook(t, body, cloudapi.Sign(body, appSecret)); r.status != http.StatusOK {
				t.Fatalf("redelivery: %d %s", r.status, r.body)
			}
			b.flush(t)
			var keys []store.StateKey
			for id := range c.states {
				keys = append(keys, store.StateKey{AccountID: "acc1", MessageID: id})
			}
			states, err := b.store.GetStates(ctx, keys)
			if err != nil {
				t.Fatal(err)
			}
			for id, w := range c.states {
				s, ok := states[store.StateKey{AccountID: "acc1", MessageID: id}]
				if !ok || s.Type != w.typ || s.ErrorCode != w.code {
					t.Errorf("%s: state %+v (found %v), want %s code %d", id, s, ok, w.typ, w.code)
				}
				if w.title == "" && w.cb == "" {
					continue
				}
				rs, err := b.store.ListReceipts(ctx, "acc1", id)
				if err != nil {
					t.Fatal(err)
				}
				found := false
				for _, rc := range rs {
					if rc.Type == w.typ {
						found = true
						if rc.ErrorTitle != w.title || rc.CallbackData != w.cb {
							t.Errorf("%s: receipt %+v, want title %q callback %q", id, rc, w.title, w.cb)
						}
					}
				}
				if !found {
					t.Errorf("%s: no %s receipt stored among %+v", id, w.typ, rs)
				}
			}
			for _, id := range c.inbound {
				n, err := b.store.AddInboundMessages(ctx, []store.InboundMessage{{AccountID: "acc1", WAMID: id, Type: "text"}})
				if err != nil || n != 0 {
					t.Errorf("inbound %s was not kept (adding it again added %d, %v)", id, n, err)
				}
			}
			dead, err := b.store.ListDeadLetters(ctx, 100)
			if err != nil {
				t.Fatal(err)
			}
			if c.deadNone && len(dead) > 0 {
				t.Errorf("dead letters %+v, want none", dead)
			}
			if len(c.dead) > 0 && len(dead) != 2*len(c.dead) {
				for _, d := range dead {
					t.Logf("dead letter: %s %s", d.Reason, d.Payload)
				}
				t.Errorf("%d dead letters, want %d (two deliveries of %d)", len(dead), 2*len(c.dead), len(c.dead))
			}
			for _, w := range c.dead {
				matched := 0
				for _, d := range dead {
					if !strings.Contains(d.Reason, w.reason) || d.Source != "webhook" {
						continue
					}
					all := true
					for _, p := range w.payload {
						all = all && strings.Contains(string(d.Payload), p)
					}
					if all {
						matched++
					}
				}
				if matched != 2 {
					for _, d := range dead {
						t.Logf("dead letter: %s %s", d.Reason, d.Payload)
					}
					t.Errorf("dead letter %q with %q: %d of two deliveries found", w.reason, w.payload, matched)
				}
			}
		})
	}
}

// backends are real SQLite always, and PostgreSQL when WAMUX_TEST_POSTGRES
// names a server.
func receiptBackends(t *testing.T) map[string]func(t *testing.T) store.Store {
	bs := map[string]func(t *testing.T) store.Store{"sqlite": func(t *testing.T) store.Store {
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "wamux.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}}
	dsn := pgtest.DSN()
	if dsn == "" {
		t.Log("WAMUX_TEST_POSTGRES is not set: PostgreSQL not tested")
		return bs
	}
	bs["postgres"] = func(t *testing.T) store.Store { return pgtest.Open(t, dsn, "wamux_hook_") }

	return bs
}

// receiptBundleOn is newReceiptBundle on the given store.
func receiptBundleOn(t *testing.T, st store.Store) *receiptBundle {
	t.Helper()
	ctx := context.Background()
	if _, err := st.CreateAccount(ctx, wamux.Account{ID: "acc1", PhoneNumberID: phoneID, AccessToken: testToken,
		BaseURL: wamux.DefaultBaseURL, RatePerSec: 80, Burst: 80, State: wamux.AccountActive}); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(httpapi.WithRequestIDs(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	reg := prometheus.NewRegistry()
	pipe, err := receipts.New(receipts.Config{Store: st, Registry: reg, Logger: log, BatchWait: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := pipe.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pipe.Stop(context.Background()) })
	api, err := httpapi.New(httpapi.Config{Store: st, Registry: reg, APIKeys: []string{testKey}, Logger: log,
		Receipts: pipe, AppSecret: appSecret, VerifyToken: verifyToken, StoreTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &receiptBundle{bundle: &bundle{srv: srv, store: st, logs: logs}, pipe: pipe}
}

// An inbound message whose id or type no store can keep (a NUL byte, an
// id longer than any wamid) is poison: dead-lettered and answered 200,
// like a status that cannot be read, while the rest of the notification
// is kept. Answering 500 would have Meta redeliver it for 7 days, and
// every delivery fail the same way.
func TestWebhookInboundPoison(t *testing.T) {
	for name, open := range receiptBackends(t) {
		t.Run(name, func(t *testing.T) {
			b := receiptBundleOn(t, open(t))
			ctx := context.Background()
			long := "wamid." + strings.Repeat("A", 3000)
			body := []byte(value(`"statuses":[{"id":"wamid.S","status":"sent","timestamp":"1750030073","recipient_id":"1"}],
				"messages":[{"from":"1","id":"wamid.N\u0000UL","timestamp":"1750030100","type":"text","text":{"body":"a"}},
				{"from":"1","id":"` + long + `","timestamp":"1750030100","type":"text","text":{"body":"b"}},
				{"from":"1","id":"wamid.T","timestamp":"1750030100","type":"te\u0000xt"},
				{"from":"1","id":"wamid.GOOD","timestamp":"1750030100","type":"text","text":{"body":"c"}}]`))
			for i := 0; i < 2; i++ {
				r := b.webhook(t, body, cloudapi.Sign(body, appSecret))
				if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"inbound":1,"receipts":1}` {
					t.Fatalf("delivery %d: %d %s, want 200 with one inbound and one receipt", i, r.status, r.body)
				}
			}
			b.flush(t)
			if n, err := b.store.AddInboundMessages(ctx, []store.InboundMessage{{AccountID: "acc1", WAMID: "wamid.GOOD", Type: "text"}}); err != nil || n != 0 {
				t.Errorf("wamid.GOOD was not kept (adding it again added %d, %v)", n, err)
			}
			states, err := b.store.GetStates(ctx, []store.StateKey{{AccountID: "acc1", MessageID: "wamid.S"}})
			if err != nil || states[store.StateKey{AccountID: "acc1", MessageID: "wamid.S"}].Type != wamux.ReceiptSent {
				t.Errorf("wamid.S state %+v (%v), want sent", states, err)
			}
			dead, err := b.store.ListDeadLetters(ctx, 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(dead) != 6 {
				t.Errorf("%d dead letters, want the three poison messages of each delivery", len(dead))
			}
			for _, d := range dead {
				if d.Source != "webhook" || d.AccountID != "acc1" || !strings.Contains(d.Reason, "inbound message") {
					t.Errorf("dead letter %+v", d)
				}
			}
		})
	}
}

// TestWebhookUnreadableItemsBesideReadable: one status, inbound message
// or async error of a signed notification whose fields have other JSON
// types than reference §4 gives them (a number for the string timestamp,
// a string for the int code) is poison like a status without an id: it
// is dead-lettered and the notification answered 200 with what could be
// read. A 400 has Meta redeliver the whole POST for 7 days (§6), and the
// statuses beside it, which every delivery fails the same way, are lost.
// A value whose own shape is wrong (statuses not an array) still has
// nothing to read and is refused.
func TestWebhookUnreadableItemsBesideReadable(t *testing.T) {
	b := newReceiptBundle(t)
	ctx := context.Background()
	body := []byte(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[
		{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":"` + phoneID + `"},
			"statuses":[{"id":"wamid.NUM","status":"sent","timestamp":1750030073,"recipient_id":"16505551234"},
				{"id":"wamid.OK","status":"delivered","timestamp":"1750030075","recipient_id":"16505551234"},
				{"id":"wamid.CODE","status":"failed","timestamp":"1750030076","recipient_id":"16505551234",
					"errors":[{"code":"131049","title":"not delivered"}]}],
			"messages":[{"from":"16505551234","id":"wamid.INBAD","timestamp":1750030100,"type":"text","text":{"body":"secret words"}},
				{"from":"16505551234","id":"wamid.INOK","timestamp":"1750030100","type":"text","text":{"body":"hi"}}],
			"errors":[{"code":"131000","title":"Something went wrong"}]}},
		{"field":"messages","value":{"messaging_product":"whatsapp","metadata":{"phone_number_id":"777"},
			"statuses":[{"id":"wamid.UNK","status":"read","timestamp":true,"recipient_id":"16505551234"}]}}]}]}`)
	for i := 0; i < 2; i++ {
		r := b.webhook(t, body, cloudapi.Sign(body, appSecret))
		if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"inbound":1,"receipts":1}` {
			t.Fatalf("delivery %d: %d %s, want 200 with one inbound and one receipt", i, r.status, r.body)
		}
	}
	b.flush(t)
	key := store.StateKey{AccountID: "acc1", MessageID: "wamid.OK"}
	states, err := b.store.GetStates(ctx, []store.StateKey{key})
	if err != nil || states[key].Type != wamux.ReceiptDelivered {
		t.Errorf("wamid.OK state %+v (%v), want delivered", states, err)
	}
	if n, err := b.store.AddInboundMessages(ctx, []store.InboundMessage{{AccountID: "acc1", WAMID: "wamid.INOK", Type: "text"}}); err != nil || n != 0 {
		t.Errorf("wamid.INOK was not kept (adding it again added %d, %v)", n, err)
	}
	dead, err := b.store.ListDeadLetters(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	// Per delivery: two statuses, one message, one error of acc1, and the
	// unknown number's value.
	want := map[string]int{"wamid.NUM": 2, "wamid.CODE": 2, "wamid.INBAD": 2, "131000": 2, "wamid.UNK": 2}
	got := map[string]int{}
	for _, d := range dead {
		p := string(d.Payload)
		for k := range want {
			if strings.Contains(p, k) {
				got[k]++
			}
		}
		if d.Source != "webhook" || strings.Contains(p, "secret words") {
			t.Errorf("dead letter %+v %s: want source webhook and no user's text", d, p)
		}
		if strings.Contains(p, "wamid.UNK") && (d.AccountID != "" || strings.Contains(p, "16505551234")) {
			t.Errorf("unknown number's dead letter %+v %s: want no account and no user's phone number", d, p)
		}
	}
	if len(dead) != 10 || len(got) != len(want) {
		for _, d := range dead {
			t.Logf("dead letter: %s %s %s", d.AccountID, d.Reason, d.Payload)
		}
		t.Errorf("%d dead letters naming %v, want 10 naming each of %v twice", len(dead), got, want)
	}
	for k, n := range got {
		if n != want[k] {
			t.Errorf("%s in %d dead letters, want %d", k, n, want[k])
		}
	}

	shape := []byte(value(`"statuses":{"id":"wamid.X","status":"sent","timestamp":"1750030073"}`))
	if r := b.webhook(t, shape, cloudapi.Sign(shape, appSecret)); r.status != http.StatusBadRequest {
		t.Errorf("statuses as an object: %d %s, want 400", r.status, r.body)
	}
}
