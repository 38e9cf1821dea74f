package cloudapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wamux/wamux/provider/cloudapi"
)

// TestReasonHoldsOnlyMetasFields: whatever a host answers (an HTML or
// plain-text page, a JSON error with fields of its own, an error text that
// echoes the access token), the Reason that becomes a message's last_error
// is built only from Meta's parsed code, message and details, never from
// the body as such, and never holds the token.
func TestReasonHoldsOnlyMetasFields(t *testing.T) {
	const marker = "FOREIGN-BODY-MARKER"
	long := strings.Repeat("x", 280) // the reason is cut at 300 bytes, inside the token
	cases := []struct {
		name, ctype, body string
		status            int
		want              string
	}{
		{"html 400", "text/html", "<html><body><h1>" + marker + "</h1><script>steal()</script></body></html>", 400, "http 400"},
		{"plain 500", "text/plain", marker + " internal stack trace at /srv/app.py:12", 500, "http 500"},
		{"html 403", "text/html", "<html>" + marker + " forbidden</html>", 403, "http 403"},
		{"html 200", "text/html", "<html>" + marker + "</html>", 200, "unreadable success response"},
		{"json without code", "application/json", `{"error":{"message":"` + marker + `"}}`, 400, "http 400"},
		{"json extra fields", "application/json",
			`{"error":{"message":"Rate limit hit","code":130429,"error_subcode":2494055,"fbtrace_id":"` + marker +
				`","error_user_msg":"` + marker + `","error_data":{"details":"Too many messages","blame":"` + marker + `"}},"debug":"` + marker + `"}`,
			400, "130429: Rate limit hit (Too many messages)"},
		{"json echoing the token", "application/json",
			`{"error":{"message":"bad token ` + testToken + `","code":190,"error_data":{"details":"` + testToken + `"}}}`,
			401, "190: bad token [redacted] ([redacted])"},
		{"json cutting the token off", "application/json",
			`{"error":{"message":"` + long + testToken + `","code":190}}`, 401, "190: " + long + "[redacted]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", c.ctype)
				w.WriteHeader(c.status)
				w.Write([]byte(c.body))
			}))
			defer srv.Close()
			cl := newClient(t, cloudapi.Config{})
			dest := cloudapi.Destination{BaseURL: srv.URL, PhoneNumberID: testNumber, AccessToken: testToken}
			for _, r := range []cloudapi.Result{cl.Send(context.Background(), dest, textMsg("m1", "15551234567")),
				cl.MarkRead(context.Background(), dest, "wamid.X")} {
				if r.Reason != c.want {
					t.Errorf("reason %q, want %q", r.Reason, c.want)
				}
				if strings.Contains(r.Reason, marker) || strings.Contains(r.Reason, "<") || strings.Contains(r.Reason, "EAAG-secr") {
					t.Errorf("reason %q holds the body or the token", r.Reason)
				}
			}
		})
	}
}
