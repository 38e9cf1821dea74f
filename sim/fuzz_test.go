package sim

import (
	"encoding/json"
	"os"
	"testing"
	"unicode/utf8"
)

func FuzzParseSend(f *testing.F) {
	for _, name := range []string{"request_text.json", "request_template.json"} {
		b, err := os.ReadFile("testdata/reference/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"messaging_product":"whatsapp","to":"+15550001111","type":"image","image":{"link":"x"}}`))
	f.Add([]byte(`{"messaging_product":"whatsapp","to":"1","contacts":[]}`))
	f.Add([]byte(`{"messaging_product":"whatsapp","to":"15550001111","type":"reaction","reaction":{"message_id":"w","emoji":"x"}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"text":{"body":null}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, e := parseSend(body)
		if (req == nil) == (e == nil) {
			t.Fatalf("want exactly one of request and error, got %v and %v", req, e)
		}
		if e != nil {
			if e.code != 100 || e.status != 400 || !json.Valid(e.body()) || !utf8.Valid(e.body()) {
				t.Fatalf("error %+v", e)
			}
			return
		}
		if e, typed := req.checkTyped(); typed {
			if e != nil {
				t.Fatalf("accepted a request its own check rejects: %+v", e)
			}
		} else if obj, ok := req.object(); !ok || len(obj) == 0 {
			t.Fatalf("accepted a request without its object: %q", body)
		}
		if !validPhone(req.To) || utf8.RuneCountInString(req.BizOpaqueCallbackData) > maxCallbackData {
			t.Fatalf("accepted an invalid request %+v from %q", req, body)
		}
	})
}
