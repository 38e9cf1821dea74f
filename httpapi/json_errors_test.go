package httpapi_test

import (
	"strings"
	"testing"
)

// TestJSONErrorsNameWhatIsWrong: a body nested too deeply, a field of
// another JSON type and a number where a time goes are each a 400 whose
// message says what is wrong, and the account is unchanged.
func TestJSONErrorsNameWhatIsWrong(t *testing.T) {
	g := newGateway(t)
	deep := `{"base_url":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`
	for _, c := range []struct{ body, want string }{
		{deep, "JSON nested too deeply (max 10000)"},
		{`{"rate_per_sec":"fast"}`, `field "rate_per_sec" must be a number`},
		{`{"state":"cooldown","cooldown_until":1700000000}`, "must be an RFC 3339 time string"},
	} {
		code, out := g.call("PATCH", "/v1/accounts/acc", c.body)
		msg, _ := out["error"].(map[string]any)["message"].(string)
		if code != 400 || !strings.Contains(msg, c.want) {
			t.Errorf("PATCH %.40s… = %d %q, want 400 saying %q", c.body, code, msg, c.want)
		}
	}
	if _, a := g.call("GET", "/v1/accounts/acc", ""); a["state"] != "active" {
		t.Fatalf("account after the refused changes: %v", a)
	}
}
