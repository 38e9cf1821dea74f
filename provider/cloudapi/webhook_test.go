package cloudapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/provider/cloudapi"
)

// A batched payload in the reference's shape (§4.4 c, b), with an unknown
// field that must be ignored.
const twoStatuses = `{
  "object": "whatsapp_business_account",
  "entry": [{
    "id": "102290129340398",
    "changes": [{
      "value": {
        "messaging_product": "whatsapp",
        "metadata": { "display_phone_number": "15550783881", "phone_number_id": "106540352242922" },
        "statuses": [
          { "id": "wamid.A", "status": "delivered", "timestamp": "1750030075", "recipient_id": "16505551234",
            "biz_opaque_callback_data": "msg-1", "new_field_from_v99": {"x": 1},
            "pricing": { "billable": true, "pricing_model": "PMP", "type": "regular", "category": "utility" } },
          { "id": "wamid.B", "status": "failed", "timestamp": "1751142888", "recipient_id": "16505557777",
            "errors": [{ "code": 131049, "title": "not delivered", "message": "m",
              "error_data": { "details": "d" }, "href": "/x" }] }
        ]
      },
      "field": "messages"
    }]
  }]
}`

func TestParseWebhook(t *testing.T) {
	w, err := cloudapi.ParseWebhook([]byte(twoStatuses))
	if err != nil {
		t.Fatal(err)
	}
	if w.Object != cloudapi.ObjectWhatsApp || len(w.Entry) != 1 || len(w.Entry[0].Changes) != 1 {
		t.Fatalf("envelope: %+v", w)
	}
	v := w.Entry[0].Changes[0].Value
	if v.Metadata.PhoneNumberID != "106540352242922" || len(v.Statuses) != 2 {
		t.Fatalf("value: %+v", v)
	}
	r, err := v.Statuses[0].Receipt()
	if err != nil {
		t.Fatal(err)
	}
	if r.MessageID != "wamid.A" || r.Type != wamux.ReceiptDelivered || r.CallbackData != "msg-1" ||
		!r.EventTime.Equal(time.Unix(1750030075, 0)) || r.Recipient != "16505551234" {
		t.Fatalf("receipt: %+v", r)
	}
	f, err := v.Statuses[1].Receipt()
	if err != nil {
		t.Fatal(err)
	}
	if f.Type != wamux.ReceiptFailed || f.ErrorCode != 131049 || f.ErrorTitle != "not delivered" {
		t.Fatalf("failed receipt: %+v", f)
	}
}

func TestParseWebhookRejectsNonObjects(t *testing.T) {
	for _, b := range []string{``, `[]`, `"x"`, `{"entry":{}}`, `{"object":`} {
		if _, err := cloudapi.ParseWebhook([]byte(b)); err == nil {
			t.Errorf("ParseWebhook(%q) accepted", b)
		}
	}
}

func TestStatusReceiptRejectsBadInput(t *testing.T) {
	for _, s := range []cloudapi.Status{
		{ID: "", Status: "sent", Timestamp: "1"},
		{ID: "w", Status: "played", Timestamp: "1"},
		{ID: "w", Status: "sent", Timestamp: "yesterday"},
	} {
		if _, err := s.Receipt(); err == nil {
			t.Errorf("Receipt(%+v) accepted", s)
		}
	}
}

// TestParseWebhookIgnoresOtherFieldsShapes: another subscription's change
// sharing the callback URL may use a name of ours with another type (here
// errors as an object, metadata as a string). It is ignored, and the
// statuses beside it still count; a "messages" change of a wrong shape is
// still refused.
func TestParseWebhookIgnoresOtherFieldsShapes(t *testing.T) {
	body := `{"object":"whatsapp_business_account","entry":[{"id":"w","changes":[` +
		`{"field":"account_update","value":{"errors":{"code":1},"metadata":"x"}},` +
		`{"field":"messages","value":{"metadata":{"phone_number_id":"p"},"statuses":[{"id":"wamid.x","status":"sent","timestamp":"1"}]}}]}]}`
	w, err := cloudapi.ParseWebhook([]byte(body))
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	c := w.Entry[0].Changes
	if len(c) != 2 || c[0].Field != "account_update" || len(c[0].Value.Errors) != 0 ||
		c[1].Value.Metadata.PhoneNumberID != "p" || len(c[1].Value.Statuses) != 1 || c[1].Value.Statuses[0].ID != "wamid.x" {
		t.Fatalf("parsed %+v", w)
	}
	bad := `{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages","value":{"errors":{"code":1}}}]}]}`
	if _, err := cloudapi.ParseWebhook([]byte(bad)); err == nil {
		t.Fatal("a messages change with errors as an object was accepted")
	}
}

// TestParseWebhookKeepsReadableItems: in a "messages" change, a status,
// inbound message or error whose fields have other JSON types than ours
// does not make the notification unreadable: the items beside it are
// decoded. A value that is not an object, or whose statuses are not an
// array, is still refused (TestParseWebhookIgnoresOtherFieldsShapes).
func TestParseWebhookKeepsReadableItems(t *testing.T) {
	body := `{"object":"whatsapp_business_account","entry":[{"id":"w","changes":[{"field":"messages","value":{
		"messaging_product":"whatsapp","metadata":{"phone_number_id":"p"},
		"statuses":[{"id":"wamid.bad","status":"sent","timestamp":1},{"id":"wamid.ok","status":"sent","timestamp":"1"},7],
		"messages":[{"id":"wamid.in","timestamp":"1","type":"text","text":"not an object"},{"id":"wamid.in2","timestamp":"1","type":"text"}],
		"errors":[{"code":"1"},{"code":2,"title":"t"}],
		"contacts":[{"wa_id":1},{"wa_id":"3"}]}}]}]}`
	w, err := cloudapi.ParseWebhook([]byte(body))
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	v := w.Entry[0].Changes[0].Value
	if v.Metadata.PhoneNumberID != "p" || v.MessagingProduct != "whatsapp" ||
		len(v.Statuses) != 1 || v.Statuses[0].ID != "wamid.ok" ||
		len(v.Messages) != 1 || v.Messages[0].ID != "wamid.in2" ||
		len(v.Errors) != 1 || v.Errors[0].Code != 2 ||
		len(v.Contacts) != 1 || v.Contacts[0].WaID != "3" {
		t.Fatalf("value %+v", v)
	}
	var got []string
	for _, u := range v.Unreadable {
		if u.Reason == "" {
			t.Errorf("unreadable %s %s without a reason", u.Kind, u.Raw)
		}
		got = append(got, u.Kind+" "+string(u.Raw))
	}
	want := []string{`message {"id":"wamid.in","timestamp":"1","type":"text","text":"not an object"}`,
		`status {"id":"wamid.bad","status":"sent","timestamp":1}`, `status 7`, `error {"code":"1"}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("unreadable:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestParseWebhookKeepsInboundItems: each inbound message keeps its item
// as sent, its shared fields, its context and its sender's profile name.
func TestParseWebhookKeepsInboundItems(t *testing.T) {
	image := `{"from":"16505551234","id":"wamid.IMG","timestamp":"1750030100","type":"image",` +
		`"context":{"from":"15550783881","id":"wamid.OURS"},` +
		`"image":{"caption":"blue?","mime_type":"image/jpeg","sha256":"abc=","id":"1003"}}`
	reaction := `{"from":"16505559999","id":"wamid.R","timestamp":"1750030101","type":"reaction","reaction":{"message_id":"wamid.OURS","emoji":"\ud83d\udc4d"}}`
	body := `{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{` +
		`"messaging_product":"whatsapp","metadata":{"phone_number_id":"106540352242922"},` +
		`"contacts":[{"profile":{"name":"Sheena"},"wa_id":"16505551234"},{"profile":{"name":"Ravi"},"wa_id":"16505559999"}],` +
		`"messages":[` + image + `,` + reaction + `]}}]}]}`
	for name, parse := range map[string]func([]byte) (*cloudapi.Webhook, error){
		"ParseWebhook": cloudapi.ParseWebhook, "ParseWebhookByChange": cloudapi.ParseWebhookByChange,
	} {
		w, err := parse([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		v := &w.Entry[0].Changes[0].Value
		if len(v.Messages) != 2 {
			t.Fatalf("%s: %d messages", name, len(v.Messages))
		}
		img, re := v.Messages[0], v.Messages[1]
		if string(img.Raw) != image || string(re.Raw) != reaction {
			t.Fatalf("%s: raw items %q, %q", name, img.Raw, re.Raw)
		}
		if img.From != "16505551234" || img.ID != "wamid.IMG" || img.Timestamp != "1750030100" || img.Type != "image" ||
			img.Context == nil || *img.Context != (cloudapi.InboundContext{From: "15550783881", ID: "wamid.OURS"}) || re.Context != nil {
			t.Fatalf("%s: fields %+v", name, img)
		}
		c := img.Content("image", "errors")
		if len(c) != 1 || string(c["image"]) != `{"caption":"blue?","mime_type":"image/jpeg","sha256":"abc=","id":"1003"}` {
			t.Fatalf("%s: content %q", name, c)
		}
		if got := string(re.Content("reaction")["reaction"]); got != `{"message_id":"wamid.OURS","emoji":"\ud83d\udc4d"}` {
			t.Fatalf("%s: reaction %q", name, got)
		}
		if v.ProfileName("16505559999") != "Ravi" || v.ProfileName("16505551234") != "Sheena" || v.ProfileName("1") != "" {
			t.Fatalf("%s: profile names", name)
		}
	}
}
