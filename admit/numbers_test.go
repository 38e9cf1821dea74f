package admit

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTemplateNumbersKeptExactly: components are canonicalised through
// []any; a JSON number must not become a float64 there, or two templates
// that differ only in a large integer get the same fingerprint (a changed
// re-submission taken for a duplicate instead of a 409) and the payload
// sent to the provider carries a number the client did not send.
func TestTemplateNumbersKeptExactly(t *testing.T) {
	tpl := func(n string) json.RawMessage {
		return json.RawMessage(`{"name":"n","language":{"code":"en"},"components":[{"type":"body","parameters":[{"type":"text","text":"x","n":` + n + `}]}]}`)
	}
	a, err := Message(Request{BizType: "b", To: "15551234567", Type: "template", Template: tpl("9007199254740993")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Message(Request{BizType: "b", To: "15551234567", Type: "template", Template: tpl("9007199254740992")})
	if err != nil {
		t.Fatal(err)
	}
	if a.ContentHash == b.ContentHash {
		t.Errorf("templates differing in a number share a fingerprint: a changed re-submission is a 200 duplicate, not a 409")
	}
	if !strings.Contains(string(a.Payload), "9007199254740993") {
		t.Errorf("payload changed the client's number: %s", a.Payload)
	}
}
