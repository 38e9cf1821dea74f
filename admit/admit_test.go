package admit

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/wamux/wamux"
)

func seq(n int64) *int64 { return &n }

func text(body string) json.RawMessage {
	raw, _ := json.Marshal(map[string]any{"body": body})
	return raw
}

func TestAdmitDerivesMsgID(t *testing.T) {
	m, err := Message(Request{BizType: "order", AccountID: "acme", ClientSeq: seq(7), To: "15551234567", Type: "text", Text: text("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != wamux.DeriveMsgID("order", "acme", 7) || m.Status != wamux.StatusWaitingSeq || m.Priority != wamux.P1 {
		t.Fatalf("admitted %+v", m)
	}
	m2, err := Message(Request{BizType: "order", To: "15551234567", Type: "text", Text: text("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if u, err := uuid.Parse(m2.ID); err != nil || u.Version() != 7 || m2.Status != wamux.StatusQueued {
		t.Fatalf("without client_seq: id %q status %s", m2.ID, m2.Status)
	}
	m3, _ := Message(Request{MsgID: "client-42", BizType: "order", AccountID: "acme", ClientSeq: seq(7), To: "15551234567", Type: "text", Text: text("hi")})
	if m3.ID != "client-42" {
		t.Fatalf("the client's msg_id was not kept: %q", m3.ID)
	}
}

func TestContentHashIsCanonical(t *testing.T) {
	a, _ := Message(Request{BizType: "b", To: "15551234567", Type: "template",
		Template: json.RawMessage(`{"name":"n","language":{"code":"en"},"components":[{"type":"body","parameters":[{"type":"text","text":"x"}]}]}`)})
	b, _ := Message(Request{BizType: "b", To: "15551234567", Type: "template",
		Template: json.RawMessage(`{ "language": {"code":"en"}, "components": [ {"parameters":[{"text":"x","type":"text"}], "type":"body"} ], "name":"n" }`)})
	if a.ContentHash == "" || a.ContentHash != b.ContentHash {
		t.Fatalf("same template, other spelling: %s vs %s", a.ContentHash, b.ContentHash)
	}
	base := Request{BizType: "b", AccountID: "acc", ClientSeq: seq(1), To: "15551234567", Type: "text", Text: text("x")}
	ref, _ := Message(base)
	variants := []func(r *Request){
		func(r *Request) { r.Text = text("y") },
		func(r *Request) { r.To = "15551234568" },
		func(r *Request) { r.Priority = "P0" },
		func(r *Request) { r.BizType = "c" },
	}
	for i, change := range variants {
		r := base
		change(&r)
		m, err := Message(r)
		if err != nil {
			t.Fatal(err)
		}
		if m.ContentHash == ref.ContentHash {
			t.Errorf("variant %d: other content, same fingerprint", i)
		}
	}
}

func TestAdmitRejects(t *testing.T) {
	ok := Request{BizType: "b", AccountID: "acc", To: "15551234567", Type: "text", Text: text("x")}
	cases := map[string]func(r *Request){
		"no biz_type":         func(r *Request) { r.BizType = "" },
		"bad biz_type":        func(r *Request) { r.BizType = "a b" },
		"no to":               func(r *Request) { r.To = "" },
		"plus in to":          func(r *Request) { r.To = "+15551234567" },
		"short to":            func(r *Request) { r.To = "12345" },
		"long to":             func(r *Request) { r.To = "1234567890123456" },
		"leading zero":        func(r *Request) { r.To = "05551234567" },
		"seq zero":            func(r *Request) { r.ClientSeq = seq(0) },
		"seq negative":        func(r *Request) { r.ClientSeq = seq(-3) },
		"seq without account": func(r *Request) { r.ClientSeq = seq(1); r.AccountID = "" },
		"bad priority":        func(r *Request) { r.Priority = "urgent" },
		"no type":             func(r *Request) { r.Type = "" },
		"unknown type":        func(r *Request) { r.Type = "carrier-pigeon" },
		"text missing":        func(r *Request) { r.Text = nil },
		"text empty body":     func(r *Request) { r.Text = text("") },
		"text too long":       func(r *Request) { r.Text = text(strings.Repeat("é", maxTextBody+1)) },
		"text unknown field":  func(r *Request) { r.Text = json.RawMessage(`{"body":"x","bold":true}`) },
		"text and template":   func(r *Request) { r.Template = json.RawMessage(`{"name":"n","language":{"code":"en"}}`) },
		"template without name": func(r *Request) {
			r.Type, r.Text, r.Template = "template", nil, json.RawMessage(`{"language":{"code":"en"}}`)
		},
		"template bad components": func(r *Request) {
			r.Type, r.Text, r.Template = "template", nil, json.RawMessage(`{"name":"n","language":{"code":"en"},"components":{}}`)
		},
		"bad msg_id": func(r *Request) { r.MsgID = "has space" },
	}
	for name, change := range cases {
		r := ok
		change(&r)
		if _, err := Message(r); wamux.ErrorCode(err) != wamux.EInvalid {
			t.Errorf("%s: err = %v, want invalid", name, err)
		}
	}
	if _, err := Message(ok); err != nil {
		t.Fatalf("the valid base request was refused: %v", err)
	}
}

// FuzzAdmit feeds arbitrary JSON through the decoding the API does and then
// Message: it must never panic, and whatever it admits must be well-formed.
func FuzzAdmit(f *testing.F) {
	f.Add([]byte(`{"biz_type":"b","to":"15551234567","type":"text","text":{"body":"hi"}}`))
	f.Add([]byte(`{"biz_type":"b","account_id":"a","client_seq":3,"to":"15551234567","type":"template","template":{"name":"n","language":{"code":"en"},"components":[]}}`))
	f.Add([]byte(`{"client_seq":-1,"text":null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var req Request
		if json.Unmarshal(raw, &req) != nil {
			return
		}
		m, err := Message(req)
		if err != nil {
			if wamux.ErrorCode(err) != wamux.EInvalid {
				t.Fatalf("non-invalid error %v", err)
			}
			return
		}
		if m.ID == "" || m.ContentHash == "" || !recipientPattern.MatchString(m.To) || !json.Valid(m.Payload) {
			t.Fatalf("admitted a malformed message %+v", m)
		}
		if m.ClientSeq != 0 && m.AccountID == "" {
			t.Fatal("admitted client_seq without account_id")
		}
	})
}
