package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
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
	f.Add([]byte(`{"messaging_product":"whatsapp","to":"15550001111","type":"text","text":{"body":"h\u00e9","preview_url":true},"biz_opaque_callback_data":"m"}`))
	f.Add([]byte(`{"messaging_product":"whatsapp","to":"15550001111","text":{"body":"x"},"to":"15550002222"}`))
	f.Add([]byte(` {"messaging_product" : "whatsapp" , "to":"15550001111","recipient_type":"individual","text":{"preview_url":false,"body":"Ã©"}} `))
	f.Add([]byte(`{"text":{"body":null}}`))
	f.Add([]byte(`{"messaging_product":"whatsapp","status":"read","message_id":"wamid.x"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		// The reflection-free path must decode exactly as encoding/json.
		if fast, ok := decodeTextFast(body); ok {
			var slow sendRequest
			if err := json.Unmarshal(body, &slow); err != nil {
				t.Fatalf("fast path accepted what encoding/json rejects (%v): %q", err, body)
			}
			if !reflect.DeepEqual(*fast, slow) {
				t.Fatalf("fast %+v, encoding/json %+v for %q", *fast, slow, body)
			}
		}
		req, e := parseSend(body)
		if (req == nil) == (e == nil) {
			t.Fatalf("want exactly one of request and error, got %v and %v", req, e)
		}
		if req != nil && req.Status != "" {
			return // a mark-as-read: markRead checks it
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

// TestFastPathTaken makes sure the common bodies do take the fast path,
// so the benchmark measures what it claims to.
func TestFastPathTaken(t *testing.T) {
	b, err := os.ReadFile("testdata/reference/request_text.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := decodeTextFast(b); !ok {
		t.Fatal("reference text request missed the fast path")
	}
	if _, ok := decodeTextFast([]byte(`{"messaging_product":"whatsapp","to":"1","type":"template","template":{}}`)); ok {
		t.Fatal("template took the text fast path")
	}
}

// FuzzInboundRequest feeds POST /sim/numbers/{id}/inbound bodies, and
// mark-as-read message ids, to a server: a body is answered 200 or 400,
// never anything else; every wamid it returns is one the number can
// mark as read, and never one of another number.
func FuzzInboundRequest(f *testing.F) {
	for _, b := range []string{
		``, `{}`, `{"count":3,"type":"image","caption":"x"}`, `{"type":"reaction"}`, `{"type":"interactive","interactive":"list_reply"}`,
		`{"type":"location","latitude":1e308,"longitude":-1e308}`, `{"from":"+491511","text":"\u00e9"}`, `{"context":"wamid.x"}`,
		`{"count":1001}`, `{"type":"contacts","name":"A B C"}`, `{"emoji":"\ud83d"}`,
	} {
		f.Add([]byte(b))
	}
	s, err := New(Config{Numbers: []Number{{PhoneNumberID: "111", AccessToken: "t"}, {PhoneNumberID: "222", AccessToken: "u"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/sim/numbers/111/inbound", bytes.NewReader(body)))
		if w.Code != http.StatusOK {
			if w.Code != http.StatusBadRequest || !json.Valid(w.Body.Bytes()) {
				t.Fatalf("%d %s for %q", w.Code, w.Body, body)
			}
			return
		}
		var res InboundResult
		if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil || len(res.WAMIDs) == 0 {
			t.Fatalf("result %s for %q", w.Body, body)
		}
		for _, id := range res.WAMIDs {
			if !s.isInbound("111", id) || s.isInbound("222", id) {
				t.Fatalf("wamid %s: inbound of 111 %v, of 222 %v", id, s.isInbound("111", id), s.isInbound("222", id))
			}
		}
		// Any string as a message id: isInbound never panics, and only
		// ids this server made pass.
		if s.isInbound("111", string(body)) && !bytes.HasPrefix(body, []byte("wamid.")) {
			t.Fatalf("isInbound accepted %q", body)
		}
	})
}
