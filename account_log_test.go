package wamux_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/wamux/wamux"
)

// TestAccountPrintsWithoutToken: String hides the token from %v and the
// text log format, but slog's JSON handler (--log-format json) ignores
// String and marshals every field, and %#v prints the struct: an Account
// logged or printed by mistake must not leak the token either way, and
// still say which account it is.
func TestAccountPrintsWithoutToken(t *testing.T) {
	const token = "EAAGsecretTOKEN0123"
	a := wamux.Account{ID: "acme-1", PhoneNumberID: "1065", AccessToken: token, State: wamux.AccountActive}
	var out bytes.Buffer
	for _, h := range []slog.Handler{slog.NewJSONHandler(&out, nil), slog.NewTextHandler(&out, nil)} {
		slog.New(h).Info("account", "account", a, "pointer", &a)
	}
	fmt.Fprintf(&out, "%v %+v %#v %s %q\n", a, a, a, a, a)
	if strings.Contains(out.String(), token) {
		t.Fatalf("the access token is printed:\n%s", out.String())
	}
	if strings.Count(out.String(), "acme-1") < 9 {
		t.Fatalf("some form no longer names the account:\n%s", out.String())
	}
}
