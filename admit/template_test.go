package admit

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wamux/wamux"
)

// TestTemplateWithoutComponentsIsOneContent: a template with no
// components may be written without the key, with null or with [];
// the three are one request. A retry that spells it otherwise must be a
// duplicate (200), not a conflict (409), and null must not reach the
// provider, which takes components only as an array.
func TestTemplateWithoutComponentsIsOneContent(t *testing.T) {
	admit := func(tpl string) wamux.Message {
		t.Helper()
		m, err := Message(Request{MsgID: "t1", BizType: "b", To: "15551234567", Type: "template", Template: json.RawMessage(tpl)})
		if err != nil {
			t.Fatalf("%s: %v", tpl, err)
		}
		return m
	}
	ref := admit(`{"name":"n","language":{"code":"en"}}`)
	for _, tpl := range []string{
		`{"name":"n","language":{"code":"en"},"components":null}`,
		`{"name":"n","language":{"code":"en"},"components":[]}`,
		`{"name":"n","language":{"code":"en"},"components":[ ]}`,
	} {
		m := admit(tpl)
		if m.ContentHash != ref.ContentHash {
			t.Errorf("%s: fingerprint differs from the template without components: a retry would be a 409", tpl)
		}
		if string(m.Payload) != string(ref.Payload) || strings.Contains(string(m.Payload), "components") {
			t.Errorf("%s: payload %s, want %s", tpl, m.Payload, ref.Payload)
		}
	}
}

// TestTemplateBlankNameOrLanguageRefused: a name or language code of
// only spaces names no template; the provider refuses it for good, so
// it is refused at submit, as a missing one is.
func TestTemplateBlankNameOrLanguageRefused(t *testing.T) {
	for _, tpl := range []string{
		`{"name":" ","language":{"code":"en"}}`,
		`{"name":"n","language":{"code":"\t"}}`,
	} {
		_, err := Message(Request{BizType: "b", To: "15551234567", Type: "template", Template: json.RawMessage(tpl)})
		if wamux.ErrorCode(err) != wamux.EInvalid || !strings.Contains(wamux.ErrorMessage(err), "template.") {
			t.Errorf("%s: err = %v, want invalid naming the field", tpl, err)
		}
	}
}

// TestClientSeqBeyondMaxNamesTheBound: a client_seq above maxClientSeq is
// refused with a message that says so; ">= 1" alone misleads a client
// whose seq is 2^53.
func TestClientSeqBeyondMaxNamesTheBound(t *testing.T) {
	_, err := Message(Request{BizType: "b", AccountID: "acc", ClientSeq: seq(maxClientSeq + 1), To: "15551234567", Type: "text", Text: text("x")})
	if wamux.ErrorCode(err) != wamux.EInvalid || !strings.Contains(wamux.ErrorMessage(err), "9007199254740991") {
		t.Fatalf("err = %v, want invalid naming the upper bound", err)
	}
	if _, err := Message(Request{BizType: "b", AccountID: "acc", ClientSeq: seq(maxClientSeq), To: "15551234567", Type: "text", Text: text("x")}); err != nil {
		t.Fatalf("maxClientSeq refused: %v", err)
	}
}

// nested is a parameter list whose text sits inside n levels of arrays
// and objects, counting the components array: [{"parameters":[{"x":[…]}]}].
func nested(n int) string {
	open, close := `[{"type":"body","parameters":`, `}]`
	inner := `"deep"`
	for level := n; level >= 3; level-- { // parameters, level 3, is an array
		if level%2 == 1 {
			inner = `[` + inner + `]`
		} else {
			inner = `{"x":` + inner + `}`
		}
	}
	return open + inner + close
}

// TestTemplateComponentsDepthBounded: components nested as deep as Meta's
// deepest (a carousel card's media parameter) and up to the bound are
// taken; one level more, or 500, is refused naming template.components
// and where the bound was crossed.
func TestTemplateComponentsDepthBounded(t *testing.T) {
	admit := func(components string) error {
		_, err := Message(Request{BizType: "b", To: "15551234567", Type: "template",
			Template: json.RawMessage(`{"name":"n","language":{"code":"en"},"components":` + components + `}`)})
		return err
	}
	carousel := `[{"type":"body","parameters":[{"type":"text","text":"Pablo"}]},{"type":"carousel","cards":[{"card_index":0,
		"components":[{"type":"header","parameters":[{"type":"image","image":{"link":"https://example.com/a.png"}}]},
		{"type":"button","sub_type":"quick_reply","index":"0","parameters":[{"type":"payload","payload":"more"}]}]}]}]`
	if err := admit(carousel); err != nil {
		t.Errorf("a carousel template: %v", err)
	}
	if err := admit(nested(maxComponentsDepth)); err != nil {
		t.Errorf("%d levels: %v", maxComponentsDepth, err)
	}
	for _, n := range []int{maxComponentsDepth + 1, 500} {
		err := admit(nested(n))
		msg := wamux.ErrorMessage(err)
		if wamux.ErrorCode(err) != wamux.EInvalid || !strings.HasPrefix(msg, "template.components nests") ||
			!strings.Contains(msg, "(at template.components[0].parameters[0]") {
			t.Errorf("%d levels: err = %v, want invalid naming template.components and the path", n, err)
		}
	}
	if err := admit(`[{"type":"body","parameters":[{"k\"ey":[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]}]}]`); !strings.Contains(wamux.ErrorMessage(err), "parameters[0][...]") {
		t.Errorf("a key that is not a plain name: err = %v, want it shown as [...]", err)
	}
}
