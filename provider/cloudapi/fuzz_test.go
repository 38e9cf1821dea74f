package cloudapi_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/wamux/wamux/provider/cloudapi"
)

func FuzzClassify(f *testing.F) {
	f.Add(200, []byte(`{"messages":[{"id":"wamid.X"}]}`), "")
	f.Add(400, errBody(130429, 2494055), "3")
	f.Add(400, errBody(100, 33), "")
	f.Add(500, []byte(`{"error":{"code":null}}`), "Wed, 21 Oct 2015 07:28:00 GMT")
	f.Add(503, []byte(`{"error":{"code":-5,"message":"`+string(make([]byte, 400))+`"}}`), "-1")
	f.Add(429, []byte(`{"error":"nope"}`), "99999999999999999999")
	f.Fuzz(func(t *testing.T, status int, body []byte, retryAfter string) {
		h := http.Header{}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		r := cloudapi.Classify(status, body, h, nil)
		if r.Outcome < cloudapi.Accepted || r.Outcome > cloudapi.Unknown {
			t.Fatalf("outcome %d out of range", r.Outcome)
		}
		if r.Outcome == cloudapi.Accepted && r.WAMID == "" {
			t.Fatal("accepted without a wamid")
		}
		if r.Delay < 0 {
			t.Fatalf("negative delay %v", r.Delay)
		}
		if r.Outcome != cloudapi.Accepted && r.Reason == "" {
			t.Fatal("failure without a reason")
		}
	})
}

func FuzzParseWebhook(f *testing.F) {
	f.Add([]byte(twoStatuses))
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":[{"changes":[{"value":{"errors":[{"code":1}]}}]}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	addInboundSeeds(f)
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages","value":{` +
		`"statuses":[{"id":"wamid.bad","status":"sent","timestamp":1},{"id":"wamid.ok","status":"sent","timestamp":"1"}]}}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		w, err := cloudapi.ParseWebhook(body)
		if err != nil {
			return
		}
		for _, e := range w.Entry {
			for _, c := range e.Changes {
				for _, u := range c.Value.Unreadable {
					if (u.Kind != cloudapi.ItemStatus && u.Kind != cloudapi.ItemMessage && u.Kind != cloudapi.ItemError) ||
						len(u.Raw) == 0 || u.Reason == "" {
						t.Fatalf("unreadable item %+v", u)
					}
				}
				for _, m := range c.Value.Messages {
					for name, v := range m.Content(m.Type, "errors") {
						if !json.Valid(v) || (name != m.Type && name != "errors") {
							t.Fatalf("content %q of %q: %q", name, m.Raw, v)
						}
					}
				}
				for _, s := range c.Value.Statuses {
					r, err := s.Receipt()
					if err == nil && (r.MessageID == "" || r.Type.Version() == 0) {
						t.Fatalf("receipt %+v from %+v", r, s)
					}
				}
			}
		}
	})
}

// addInboundSeeds adds inbound messages of other types, a reply's context,
// a null item, keys of another case, a duplicate key and fields of
// another shape.
func addInboundSeeds(f *testing.F) {
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"p"},` +
		`"contacts":[{"profile":{"name":"Ana"},"wa_id":"3"}],"messages":[{"from":"3","id":"wamid.i","timestamp":"1","type":"image",` +
		`"image":{"id":"m1","mime_type":"image/jpeg","sha256":"h","caption":"c"},"context":{"from":"1","id":"wamid.o"}},null,` +
		`{"FROM":"3","Id":"wamid.j","type":"location","location":{"latitude":1.5,"longitude":-2}, "Context":null},` +
		`{"id":"wamid.k","id":"wamid.l","type":"interactive","interactive":{"type":"button_reply","button_reply":{"id":"b","title":"t"}}}]}}]}]}`))
	f.Add([]byte(`{"entry":[{"changes":[{"field":"messages","value":{"messages":[{"id":"w","context":"not an object"},{"id":"v","text":{"body":1}}]}}]}]}`))
	f.Add([]byte(`{"entry":[{"changes":[{"value":{"messages":[{"id":"w"}],"messages":[{"type":"x"},{"id":"y"}]}}]}]}`))
}

func FuzzVerifySignature(f *testing.F) {
	f.Add("sha256=00", []byte("{}"), "k")
	f.Add(cloudapi.Sign([]byte("{}"), "k"), []byte("{}"), "k")
	f.Add("", []byte(nil), "")
	f.Fuzz(func(t *testing.T, header string, body []byte, secret string) {
		got := cloudapi.VerifySignature(header, body, secret)
		if got && secret == "" {
			t.Fatal("verified with an empty secret")
		}
		if secret != "" && !cloudapi.VerifySignature(cloudapi.Sign(body, secret), body, secret) {
			t.Fatal("own signature does not verify")
		}
	})
}

// FuzzParseWebhookMatchesStdlib: ParseWebhook accepts exactly the bodies
// encoding/json decodes into a Webhook, to the same value, and those it
// refuses only when ParseWebhookByChange refuses them too; a body that is
// not all UTF-8 it decodes as ParseWebhookByChange does. Its seeds cover
// where JSON decoders differ: invalid UTF-8, duplicate keys, numbers out of
// range, nulls, case-insensitive keys and trailing data.
func FuzzParseWebhookMatchesStdlib(f *testing.F) {
	f.Add([]byte(twoStatuses))
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":[{"changes":[{"value":{"errors":[{"code":1}]}}]}]}`))
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{` +
		`"messaging_product":"whatsapp","metadata":{"display_phone_number":"1","phone_number_id":"2"},` +
		`"contacts":[{"profile":{"name":"Ana"},"wa_id":"3"}],"messages":[{"from":"3","id":"wamid.in","timestamp":"1",` +
		`"type":"text","text":{"body":"hi \u00e9 \ud83d\ude00"}}],"statuses":[{"id":"wamid.x","status":"failed","timestamp":"2",` +
		`"recipient_id":"3","conversation":{"id":"c","origin":{"type":"utility"}},"pricing":{"billable":false,` +
		`"pricing_model":"PMP","category":"utility"},"errors":[{"code":131049,"title":"t","message":"m",` +
		`"error_data":{"details":"d"},"href":"h"}]}]}}]}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	addInboundSeeds(f)
	f.Add([]byte(`{"object":"x","Object":"y","ENTRY":[{"ID":"a"}]}`))
	f.Add([]byte("{\"object\":\"\xff\"}"))
	f.Add([]byte(`{"object":"a"} {}`))
	f.Add([]byte(`{"entry":[{"changes":[{"value":{"statuses":[{"errors":[{"code":1.5}]}]}}]}]}`))
	f.Add([]byte(`{"entry":{"id":"not an array"}}`))
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"p"},` +
		`"statuses":[{"id":"wamid.bad","status":"sent","timestamp":1},{"id":"wamid.ok","status":"sent","timestamp":"1"},null,7],` +
		`"messages":[{"id":"in","timestamp":2}],"errors":[{"code":"1"}],"contacts":[{"wa_id":1}]}}]}]}`))
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"account_update","value":{"errors":{"code":1}}},` +
		`{"field":"messages","value":{"statuses":[{"id":"wamid.x","status":"sent","timestamp":"1"}]}}]}]}`))
	// Duplicate keys: the last wins, objects are merged.
	f.Add([]byte(`{"object":"a","object":"b","entry":[{"id":"1"}],"entry":[{"changes":[]}]}`))
	f.Add([]byte(`{"entry":[{"changes":[{"value":{"metadata":{"phone_number_id":"p"},"metadata":{"display_phone_number":"d"}}}]}]}`))
	// Numbers too big or not integral for an int, in a known field.
	f.Add([]byte(`{"entry":[{"changes":[{"value":{"errors":[{"code":99999999999999999999}]}}]}]}`))
	f.Add([]byte(`{"entry":[{"changes":[{"value":{"errors":[{"code":1e400}]}}]}]}`))
	f.Add([]byte(`{"entry":[{"changes":[{"value":{"errors":[{"code":-0},{"code":1E2},{"code":-9223372036854775809}]}}]}]}`))
	f.Add([]byte(`{"extra":123456789012345678901234567890e99999,"object":"o"}`))
	// Nulls at every level.
	f.Add([]byte(`{"object":null,"entry":[null,{"id":null,"changes":[null,{"field":null,"value":null}]}]}`))
	f.Add([]byte(`{"entry":[{"changes":[{"value":{"statuses":[{"id":"w","conversation":null,"pricing":{"billable":null},"errors":null}]}}]}]}`))
	// Keys matched case-insensitively, with Unicode folding (ſ) and escapes.
	f.Add([]byte(`{"OBJECT":"o","Entry":[{"Changes":[{"FIELD":"messages","VALUE":{"ſtatuſes":[{"ID":"w","STATUS":"sent"}]}}]}]}`))
	f.Add([]byte(`{"objec\u0074":"o","\u0065ntry":[{"changes":[{"value":{"statuses":[{"id":"\ud800"}]}}]}]}`))
	f.Add([]byte("{\"object\":\"\xed\xa0\x80\xc0\xaf\",\"entry\":[{\"id\":\"\xf4\x90\x80\x80\"}]}"))
	f.Add([]byte("{\"obj\xffect\":\"o\"}"))
	// Trailing data, whitespace and truncation.
	f.Add([]byte(" \t\r\n{\"object\":\"o\"}\n"))
	f.Add([]byte(`{"object":"o"`))
	f.Add([]byte(`{"object":"o"}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var want cloudapi.Webhook
		stdErr := json.Unmarshal(body, &want)
		if stdErr != nil || !utf8.Valid(body) {
			// A body that does not decode as a whole, or is not all
			// UTF-8, is decoded change by change (other subscriptions'
			// values ignored).
			w, err := cloudapi.ParseWebhookByChange(body)
			want, stdErr = cloudapi.Webhook{}, err
			if err == nil {
				want = *w
			}
		}
		got, err := cloudapi.ParseWebhook(body)
		if (stdErr == nil) != (err == nil) {
			t.Fatalf("encoding/json says %v, ParseWebhook %v, on %q", stdErr, err, body)
		}
		if err == nil && !reflect.DeepEqual(*got, want) {
			t.Fatalf("decoded differently from encoding/json on %q:\n got %+v\nwant %+v", body, *got, want)
		}
		if err == nil {
			checkInboundMatchesStdlib(t, got)
		}
	})
}

// checkInboundMatchesStdlib: every inbound message's fields are what
// encoding/json decodes from its Raw, which is valid JSON.
func checkInboundMatchesStdlib(t *testing.T, w *cloudapi.Webhook) {
	t.Helper()
	for _, e := range w.Entry {
		for _, c := range e.Changes {
			for _, m := range c.Value.Messages {
				if m.Raw == nil {
					continue // a null item
				}
				var want struct {
					From, ID, Timestamp, Type string
					Context                   *cloudapi.InboundContext
					Text                      *cloudapi.InboundText
				}
				if err := json.Unmarshal(m.Raw, &want); err != nil {
					t.Fatalf("Raw %q does not decode: %v", m.Raw, err)
				}
				if m.From != want.From || m.ID != want.ID || m.Timestamp != want.Timestamp || m.Type != want.Type ||
					!reflect.DeepEqual(m.Context, want.Context) || !reflect.DeepEqual(m.Text, want.Text) {
					t.Fatalf("inbound message %+v, encoding/json decodes %q to %+v", m, m.Raw, want)
				}
			}
		}
	}
}

// TestParseWebhookRefusesDeepNesting: encoding/json refuses nesting deeper
// than 10,000 levels; so must ParseWebhook, in a known field or not.
func TestParseWebhookRefusesDeepNesting(t *testing.T) {
	deep := strings.Repeat("[", 10_001) + strings.Repeat("]", 10_001)
	for _, body := range []string{
		`{"object":"whatsapp_business_account","extra":` + deep + `}`,
		`{"object":"whatsapp_business_account","entry":[{"changes":[{"value":{"statuses":[{"id":` + deep + `}]}}]}]}`,
	} {
		if _, err := cloudapi.ParseWebhook([]byte(body)); err == nil {
			t.Errorf("accepted %d levels of nesting", 10_001)
		}
	}
}
