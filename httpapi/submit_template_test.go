package httpapi_test

import (
	"strings"
	"testing"
)

// TestSubmitTemplateEmptyComponentsIsDuplicate: a client retries a
// template without components, once writing "components":[] and once
// leaving it out. The retry is the same request: 200 duplicate, not 409.
func TestSubmitTemplateEmptyComponentsIsDuplicate(t *testing.T) {
	g := newGateway(t)
	body := func(tpl string) string {
		return `{"msg_id":"tpl-1","biz_type":"b","account_id":"acc","to":"15551230000","type":"template","template":` + tpl + `}`
	}
	if code, out := g.call("POST", "/v1/messages", body(`{"name":"n","language":{"code":"en"}}`)); code != 202 {
		t.Fatalf("submit = %d %v", code, out)
	}
	for _, tpl := range []string{`{"name":"n","language":{"code":"en"},"components":[]}`, `{"components":null,"language":{"code":"en"},"name":"n"}`} {
		if code, out := g.call("POST", "/v1/messages", body(tpl)); code != 200 || out["duplicate"] != true {
			t.Errorf("retry with %s = %d %v, want 200 duplicate", tpl, code, out)
		}
	}
	if code, out := g.call("POST", "/v1/messages", `{"biz_type":"b","account_id":"acc","to":"15551230000","type":"template","template":{"name":" ","language":{"code":"en"}}}`); code != 400 || errCode(out) != "invalid" {
		t.Errorf("blank template name = %d %v, want 400 invalid", code, out)
	}
}

// TestSubmitTemplateNestedTooDeepRefused: components nested 500 deep are
// refused with a 400 naming template.components, alone or as an item of
// a batch, and nothing is stored.
func TestSubmitTemplateNestedTooDeepRefused(t *testing.T) {
	g := newGateway(t)
	deep := `[{"type":"body","parameters":` + strings.Repeat(`[`, 498) + `"x"` + strings.Repeat(`]`, 498) + `}]`
	msg := `{"msg_id":"tpl-deep","biz_type":"b","account_id":"acc","to":"15551230000","type":"template",` +
		`"template":{"name":"n","language":{"code":"en"},"components":` + deep + `}}`
	names := func(out map[string]any) bool {
		e, _ := out["error"].(map[string]any)
		m, _ := e["message"].(string)
		return strings.HasPrefix(m, "template.components nests")
	}
	if code, out := g.call("POST", "/v1/messages", msg); code != 400 || errCode(out) != "invalid" || !names(out) {
		t.Errorf("submit = %d %v, want 400 invalid naming template.components", code, out)
	}
	code, out := g.call("POST", "/v1/messages:batch", `{"messages":[`+msg+`]}`)
	res, _ := out["results"].([]any)
	if code != 200 || len(res) != 1 {
		t.Fatalf("batch = %d %v", code, out)
	}
	if item, _ := res[0].(map[string]any); errCode(item) != "invalid" || !names(item) {
		t.Errorf("batch item = %v, want invalid naming template.components", item)
	}
	if code, out := g.call("GET", "/v1/messages/tpl-deep", ""); code != 404 {
		t.Errorf("GET the refused message = %d %v, want 404", code, out)
	}
}
