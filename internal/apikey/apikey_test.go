package apikey_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/wamux/wamux/internal/apikey"
)

func TestParseScopes(t *testing.T) {
	keys, err := apikey.Parse([]string{"key-one-1", "key-two-2:send", "key-three:read+send", " key-four : admin ", "key-five:send+send"})
	if err != nil {
		t.Fatal(err)
	}
	want := []apikey.Key{
		{Secret: "key-one-1", Scopes: apikey.All},
		{Secret: "key-two-2", Scopes: apikey.Send},
		{Secret: "key-three", Scopes: apikey.Read | apikey.Send},
		{Secret: "key-four", Scopes: apikey.Admin},
		{Secret: "key-five", Scopes: apikey.Send},
	}
	if len(keys) != len(want) {
		t.Fatalf("got %d keys, want %d", len(keys), len(want))
	}
	for i := range want {
		if keys[i] != want[i] {
			t.Errorf("entry %d: got %v (%q), want %v", i+1, keys[i], keys[i].Secret, want[i])
		}
	}
	if got := keys[2].Scopes.String(); got != "send+read" {
		t.Errorf("scopes print as %q, want send+read", got)
	}
	if !apikey.All.Has(apikey.Admin) || apikey.Send.Has(apikey.Read) || !(apikey.Read | apikey.Send).Has(apikey.Send) {
		t.Error("Has answers wrongly")
	}
}

// TestParseErrorsHideTheKey: every refusal names the entry's position and
// what is wrong, and never the text of any entry (a scope after the colon
// may be the rest of a key that holds a colon).
func TestParseErrorsHideTheKey(t *testing.T) {
	cases := []struct {
		entries []string
		want    string
	}{
		{[]string{"s3cret-key-aaaa", ":send"}, "API key 2 of 2: the key before ':' is empty"},
		{[]string{"s3cret-key-aaaa:write"}, "API key 1 of 1: unknown or empty scope"},
		{[]string{"s3cret-key-aaaa:"}, "unknown or empty scope"},
		{[]string{"s3cret-key-aaaa:send+"}, "unknown or empty scope"},
		{[]string{"s3cret-key-aaaa:Send"}, "unknown or empty scope"},
		{[]string{"s3cret-key-aaaa:send", "other-key-1", "s3cret-key-aaaa:read"}, "API keys 1 and 3 are the same key"},
	}
	for _, c := range cases {
		_, err := apikey.Parse(c.entries)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%d entries: error %v, want it to contain %q", len(c.entries), err, c.want)
			continue
		}
		for _, secret := range []string{"s3cret", "write", "Send", "other-key"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q shows %q", err, secret)
			}
		}
	}
}

// TestIDIsShortAndStable: the id is the first 8 hex digits of the key's
// SHA-256, what `printf %s "$KEY" | sha256sum | cut -c1-8` prints.
func TestIDIsShortAndStable(t *testing.T) {
	// sha256("abc") = ba7816bf…
	if got := apikey.ID("abc"); got != "ba7816bf" {
		t.Errorf("ID(abc) = %s, want ba7816bf", got)
	}
	k := apikey.Key{Secret: "abc", Scopes: apikey.Send}
	if k.ID() != "ba7816bf" {
		t.Errorf("Key.ID = %s", k.ID())
	}
}

// TestKeyNeverPrintsItsText: fmt and slog (text and JSON) show the id and
// scopes only.
func TestKeyNeverPrintsItsText(t *testing.T) {
	k := apikey.Key{Secret: "very-secret-key-123", Scopes: apikey.Read}
	var out bytes.Buffer
	fmt.Fprintf(&out, "%v %+v %s\n", k, k, k)
	slog.New(slog.NewJSONHandler(&out, nil)).Info("k", "key", k)
	slog.New(slog.NewTextHandler(&out, nil)).Info("k", "key", k)
	if strings.Contains(out.String(), k.Secret) {
		t.Fatalf("the key's text was printed: %s", out.String())
	}
	if strings.Count(out.String(), k.ID()) != 5 || !strings.Contains(out.String(), "read") {
		t.Fatalf("id or scopes missing: %s", out.String())
	}
}
