package cloudapi_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/wamux/wamux/provider/cloudapi"
)

// TestDestinationPrintsWithoutToken: like wamux.Account, a Destination
// logged in either format or printed with any verb hides its token.
func TestDestinationPrintsWithoutToken(t *testing.T) {
	const token = "EAAGsecretTOKEN0123"
	d := cloudapi.Destination{BaseURL: "https://graph.facebook.com", PhoneNumberID: "1065", AccessToken: token}
	var out bytes.Buffer
	for _, h := range []slog.Handler{slog.NewJSONHandler(&out, nil), slog.NewTextHandler(&out, nil)} {
		slog.New(h).Info("send", "dest", d, "pointer", &d)
	}
	fmt.Fprintf(&out, "%v %+v %#v %s %q\n", d, d, d, d, d)
	if strings.Contains(out.String(), token) {
		t.Fatalf("the access token is printed:\n%s", out.String())
	}
	if strings.Count(out.String(), "1065") < 9 {
		t.Fatalf("some form no longer names the number:\n%s", out.String())
	}
}
