package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/receipts"
)

// FuzzNormalizeWebhook: whatever a signed notification holds, the
// handler's normalisation never panics, accounts for every status of a
// known number exactly once (receipt, ignored or dead letter; one of
// another JSON shape included), gives
// every receipt its account, and yields receipts already in canonical form.
func FuzzNormalizeWebhook(f *testing.F) {
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"p1"},"statuses":[{"id":"wamid.1","status":"sent","timestamp":"1750030073"},{"id":"wamid.1","status":"failed","timestamp":"1750030080","errors":[{"code":131049,"title":"x"}]}]}}]}]}`))
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":[{"changes":[{"value":{"metadata":{"phone_number_id":"p2"},"statuses":[{"id":"w","status":"read","timestamp":"1"}]}},{"value":{"metadata":{"phone_number_id":"p1"},"messages":[{"id":"in","type":"text","timestamp":"x"}],"errors":[{"code":131000}]}}]}]}`))
	f.Add([]byte(`{"entry":[{"changes":[{"value":{"metadata":{"phone_number_id":"p1"},"statuses":[{"id":"","status":"played","timestamp":"-5"},{"id":"w","status":"delivered","timestamp":"99999999999999999"}]}}]}]}`))
	// Reference §4 shapes: a group recipient, untracked status values,
	// top-level errors beside an unknown number, inbound ids no store keeps.
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"p1"},"statuses":[{"id":"wamid.G","status":"read","timestamp":"1750030080","recipient_id":"120363025246125486@g.us","recipient_type":"group","recipient_participant_id":"1"},{"id":"wamid.D","status":"deleted","timestamp":"1750030080"},{"id":"wamid.H","status":"held_for_quality_assessment","timestamp":"1750030080"}]}},{"field":"messages","value":{"metadata":{"phone_number_id":"p2"},"errors":[{"code":131000,"title":"Something went wrong"}]}},{"field":"message_template_status_update","value":{"event":"APPROVED","message_template_id":1}}]}]}`))
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"p1"},"messages":[{"id":"wamid.N\u0000","type":"text","timestamp":"1750030100"},{"id":" ","type":"te\u0000xt"},{"id":"wamid.OK","type":"reaction","timestamp":"1750030100"}]}}]}]}`))
	// Items of another JSON shape beside readable ones, of a known and an
	// unknown number.
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"p1"},"statuses":[{"id":"w1","status":"sent","timestamp":1},{"id":"w2","status":"sent","timestamp":"1750030073"},7],"messages":[{"id":"in","type":"text","timestamp":1}],"errors":[{"code":"1"}]}},{"field":"messages","value":{"metadata":{"phone_number_id":"p2"},"statuses":[{"id":"w3","status":"read","timestamp":true}]}}]}]}`))
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"p1"},` +
		`"contacts":[{"profile":{"name":"K\u00e9"},"wa_id":"1"}],"messages":[{"from":"1","id":"wamid.A","timestamp":"1750030100","type":"image",` +
		`"image":{"id":"m","caption":"\ud800 x"},"context":{"from":"2","id":"wamid.OURS"}},{"from":"1","id":"wamid.B","timestamp":"-99999999999999",` +
		`"type":"from","from":"1"},{"id":"wamid.C","type":"unsupported","errors":[{"code":131051}],"context":{"id":"wamid.X"}}]}}]}]}`))
	f.Add([]byte("{\"entry\":[{\"changes\":[{\"value\":{\"metadata\":{\"phone_number_id\":\"p1\"},\"messages\":[{\"id\":\"w\",\"from\":\"\xff\",\"type\":\"text\",\"text\":{\"body\":\"\xfe\"}}]}}]}]}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		hook, err := cloudapi.ParseWebhook(body)
		if err != nil {
			return
		}
		lookup := func(phone string) (string, bool, error) {
			if phone == "p1" {
				return "acc1", true, nil
			}
			return "", false, nil
		}
		n, err := normalizeWebhook(hook, lookup, time.Unix(1750030000, 0))
		if err != nil {
			t.Fatalf("normalize: %v", err)
		}
		statuses := 0
		for _, e := range hook.Entry {
			for _, c := range e.Changes {
				if c.Value.Metadata.PhoneNumberID == "p1" {
					statuses += len(c.Value.Statuses)
					for _, u := range c.Value.Unreadable {
						if u.Kind == cloudapi.ItemStatus {
							statuses++
						}
					}
				}
			}
		}
		if got := len(n.receipts) + n.ignored + len(n.dead["invalid_status"]); got != statuses {
			t.Fatalf("%d statuses of the known number became %d receipts + %d ignored + %d dead letters",
				statuses, len(n.receipts), n.ignored, len(n.dead["invalid_status"]))
		}
		for _, r := range n.receipts {
			if r.AccountID != "acc1" {
				t.Fatalf("receipt of account %q, want acc1", r.AccountID)
			}
			again := r
			if err := receipts.Normalize(&again); err != nil || again != r {
				t.Fatalf("receipt %+v is not in canonical form (%v)", r, err)
			}
		}
		n.fillInboundData(map[replyKey]string{{"acc1", "wamid.OURS"}: "msg-1"})
		for _, in := range n.inbound {
			var data struct {
				AccountID string `json:"account_id"`
				WAMID     string `json:"wamid"`
				From      string `json:"from"`
				Context   *struct {
					WAMID string `json:"wamid"`
					MsgID string `json:"msg_id"`
				} `json:"context"`
			}
			if !utf8.Valid(in.Data) || json.Unmarshal(in.Data, &data) != nil {
				t.Fatalf("event data %q is not a JSON object in UTF-8", in.Data)
			}
			if data.AccountID != in.AccountID || data.WAMID != in.WAMID || data.From != strings.ToValidUTF8(in.From, "\uFFFD") {
				t.Fatalf("event data %q of %+v", in.Data, in)
			}
			if data.Context != nil && (data.Context.MsgID != "") != (data.Context.WAMID == "wamid.OURS") {
				t.Fatalf("event data %q names msg_id %q", in.Data, data.Context.MsgID)
			}
		}
		if n.known == 0 && (len(n.receipts) > 0 || len(n.inbound) > 0 || len(n.dead) > 0) {
			t.Fatal("a notification without a known number produced something to store")
		}
	})
}
