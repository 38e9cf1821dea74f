package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/store"
)

// inboundKinds are inbound messages of every type Meta documents, each as
// the "<type>" object it carries (reference §4.5 and the webhook docs).
var inboundKinds = []struct{ typ, object string }{
	{"text", `{"body":"Does it come in another color? \u00e9 \ud83d\ude00 <b>&"}`},
	{"image", `{"caption":"this one","mime_type":"image/jpeg","sha256":"JxS1fu+3bAVm5fZM5mQ9y2z0gTwV2Q7N3M6Yb3rA0Vk=","id":"1003383421387256"}`},
	{"sticker", `{"mime_type":"image/webp","sha256":"K3c=","id":"1231","animated":false}`},
	{"audio", `{"mime_type":"audio/ogg; codecs=opus","sha256":"M2E=","id":"1232","voice":true}`},
	{"video", `{"mime_type":"video/mp4","sha256":"N2E=","id":"1233","caption":"look"}`},
	{"document", `{"caption":"invoice","filename":"inv.pdf","mime_type":"application/pdf","sha256":"O2E=","id":"1234"}`},
	{"location", `{"address":"1 Hacker Way, Menlo Park, CA 94025","latitude":37.483307,"longitude":-122.148981,"name":"Main Office","url":"https://example.com"}`},
	{"contacts", `[{"name":{"formatted_name":"Ana Ruiz","first_name":"Ana","last_name":"Ruiz"},"phones":[{"phone":"+1 650 555 1234","type":"CELL","wa_id":"16505551234"}],"emails":[{"email":"ana@example.com","type":"WORK"}]}]`},
	{"interactive", `{"type":"list_reply","list_reply":{"id":"row-2","title":"Blue","description":"size M"}}`},
	{"button", `{"payload":"STOP_PROMOTIONS","text":"Stop promotions"}`},
	{"reaction", `{"message_id":"wamid.OURS","emoji":"\ud83d\udc4d"}`},
	{"order", `{"catalog_id":"c1","text":"please","product_items":[{"product_retailer_id":"sku-1","quantity":2,"item_price":9.5,"currency":"USD"}]}`},
	{"system", `{"body":"NAME changed from 16505551234 to 16505559999","wa_id":"16505559999","type":"user_changed_number"}`},
}

// inboundItem is one message of type typ carrying object, with extra
// fields after it.
func inboundItem(id, from, typ, object, extra string) string {
	return fmt.Sprintf(`{"from":%q,"id":%q,"timestamp":"1750030100","type":%q,%q:%s%s}`, from, id, typ, typ, object, extra)
}

// inboundBody is a signed notification of acc1's number carrying items.
func inboundBody(items ...string) []byte {
	return []byte(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{` +
		`"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"` + phoneID + `"},` +
		`"contacts":[{"profile":{"name":"Kerry Fisher"},"wa_id":"16315551234"}],` +
		`"messages":[` + strings.Join(items, ",") + `]}}]}]}`)
}

// inboundEvents reads every message.inbound event's data, by wamid.
func (b *receiptBundle) inboundEvents(t *testing.T) map[string]map[string]json.RawMessage {
	t.Helper()
	evs, _, err := b.store.ListEvents(context.Background(), "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]json.RawMessage{}
	for _, e := range evs {
		if e.Type != wamux.EventMessageInbound {
			continue
		}
		var data map[string]json.RawMessage
		if err := json.Unmarshal(e.Data, &data); err != nil {
			t.Fatalf("event data %q is not a JSON object: %v", e.Data, err)
		}
		if _, dup := out[e.WAMID]; dup {
			t.Fatalf("two events for %s", e.WAMID)
		}
		out[e.WAMID] = data
	}
	return out
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%q: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// TestWebhookInboundEventCarriesEveryType: a notification with one message
// of each type stores each with its sender, and its message.inbound event
// holds the shared fields and the type's object as Meta sent it; a
// redelivery adds no second event.
func TestWebhookInboundEventCarriesEveryType(t *testing.T) {
	b := newReceiptBundle(t)
	var items []string
	for i, k := range inboundKinds {
		items = append(items, inboundItem(fmt.Sprintf("wamid.K%d", i), "16315551234", k.typ, k.object, ""))
	}
	unsupported := `{"from":"16315551234","id":"wamid.UNS","timestamp":"1750030100","type":"unsupported",` +
		`"errors":[{"code":131051,"title":"Message type unknown","error_data":{"details":"not supported"}}]}`
	items = append(items, unsupported)
	body := inboundBody(items...)
	want := fmt.Sprintf(`{"inbound":%d,"receipts":0}`, len(items))
	for round := range 2 {
		r := b.webhook(t, body, cloudapi.Sign(body, appSecret))
		if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != want {
			t.Fatalf("round %d: %d %s, want 200 %s", round, r.status, r.body, want)
		}
	}
	evs := b.inboundEvents(t)
	if len(evs) != len(items) {
		t.Fatalf("%d inbound events after a redelivery, want %d", len(evs), len(items))
	}
	for i, k := range inboundKinds {
		id := fmt.Sprintf("wamid.K%d", i)
		d := evs[id]
		for key, v := range map[string]string{"account_id": "acc1", "from": "16315551234", "wamid": id, "type": k.typ,
			"timestamp": "2025-06-15T23:28:20Z", "profile_name": "Kerry Fisher"} {
			if got := string(d[key]); got != fmt.Sprintf("%q", v) {
				t.Errorf("%s: %s = %s, want %q", k.typ, key, got, v)
			}
		}
		if !sameJSON(t, d[k.typ], []byte(k.object)) {
			t.Errorf("%s: object %s, sent %s", k.typ, d[k.typ], k.object)
		}
		if _, ok := d["context"]; ok {
			t.Errorf("%s: context without one sent", k.typ)
		}
	}
	if d := evs["wamid.UNS"]; !sameJSON(t, d["errors"], []byte(`[{"code":131051,"title":"Message type unknown","error_data":{"details":"not supported"}}]`)) {
		t.Errorf("unsupported: errors %s", d["errors"])
	}
}

// findCounter counts FindMessages calls.
type findCounter struct {
	store.Store
	finds atomic.Int64
}

func (c *findCounter) FindMessages(ctx context.Context, wamids, msgIDs []string) ([]wamux.Message, error) {
	c.finds.Add(1)
	return c.Store.FindMessages(ctx, wamids, msgIDs)
}

// TestWebhookInboundReplyNamesOurMessage: a reply's context carries the
// msg_id of the message it replies to when that is one of the account's,
// found with one store query for the whole notification.
func TestWebhookInboundReplyNamesOurMessage(t *testing.T) {
	counter := &findCounter{}
	b, _ := newReceiptServerWith(t, false, func(c *httpapi.Config) { counter.Store = c.Store; c.Store = counter })
	ctx := context.Background()
	if _, err := b.store.CreateAccount(ctx, wamux.Account{ID: "acc2", PhoneNumberID: "999", AccessToken: testToken,
		BaseURL: wamux.DefaultBaseURL, RatePerSec: 80, Burst: 80, State: wamux.AccountActive}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, m := range []wamux.Message{
		{ID: "msg-ours", AccountID: "acc1", To: "16315551234", Type: "text", Payload: []byte(`{"body":"hi"}`),
			ContentHash: "h1", Status: wamux.StatusSent, WAMID: "wamid.OURS", CreatedAt: now, UpdatedAt: now},
		{ID: "msg-theirs", AccountID: "acc2", To: "16315551234", Type: "text", Payload: []byte(`{"body":"hi"}`),
			ContentHash: "h2", Status: wamux.StatusSent, WAMID: "wamid.THEIRS", CreatedAt: now, UpdatedAt: now},
	} {
		if _, err := b.store.InsertMessages(ctx, []wamux.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	body := inboundBody(
		inboundItem("wamid.R1", "16315551234", "text", `{"body":"yes"}`, `,"context":{"from":"15550783881","id":"wamid.OURS"}`),
		inboundItem("wamid.R2", "16315551234", "interactive", `{"type":"button_reply","button_reply":{"id":"b1","title":"Yes"}}`,
			`,"context":{"from":"15550783881","id":"wamid.OURS"}`),
		inboundItem("wamid.R3", "16315551234", "text", `{"body":"?"}`, `,"context":{"from":"15550783881","id":"wamid.THEIRS"}`),
		inboundItem("wamid.R4", "16315551234", "text", `{"body":"?"}`, `,"context":{"from":"15550783881","id":"wamid.GONE"}`),
	)
	before := counter.finds.Load()
	if r := b.webhook(t, body, cloudapi.Sign(body, appSecret)); r.status != http.StatusOK {
		t.Fatalf("webhook: %d %s", r.status, r.body)
	}
	if n := counter.finds.Load() - before; n != 1 {
		t.Fatalf("%d FindMessages calls for one notification, want 1", n)
	}
	evs := b.inboundEvents(t)
	for id, want := range map[string]string{
		"wamid.R1": `{"wamid":"wamid.OURS","from":"15550783881","msg_id":"msg-ours"}`,
		"wamid.R2": `{"wamid":"wamid.OURS","from":"15550783881","msg_id":"msg-ours"}`,
		"wamid.R3": `{"wamid":"wamid.THEIRS","from":"15550783881"}`, // another account's
		"wamid.R4": `{"wamid":"wamid.GONE","from":"15550783881"}`,
	} {
		if got := evs[id]["context"]; got == nil || !sameJSON(t, got, []byte(want)) {
			t.Errorf("%s: context %s, want %s", id, got, want)
		}
	}
}
