package httpapi_test

import "testing"

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
