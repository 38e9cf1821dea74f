package cloudapi_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/wamux/wamux/provider/cloudapi"
)

func TestSignMatchesIndependentHMAC(t *testing.T) {
	body := []byte(`{"object":"whatsapp_business_account","entry":[]}`)
	m := hmac.New(sha256.New, []byte("s3cret"))
	m.Write(body)
	want := "sha256=" + hex.EncodeToString(m.Sum(nil))
	if got := cloudapi.Sign(body, "s3cret"); got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

func TestVerifySignature(t *testing.T) {
	body := []byte(`{"a":1}`)
	good := cloudapi.Sign(body, "k")
	cases := []struct {
		name   string
		header string
		body   []byte
		secret string
		want   bool
	}{
		{"good", good, body, "k", true},
		{"uppercase hex", "sha256=" + strings.ToUpper(strings.TrimPrefix(good, "sha256=")), body, "k", true},
		{"other secret", good, body, "K", false},
		{"other body", good, []byte(`{"a":2}`), "k", false},
		{"no prefix", strings.TrimPrefix(good, "sha256="), body, "k", false},
		{"sha1", "sha1=" + strings.TrimPrefix(good, "sha256="), body, "k", false},
		{"short", good[:20], body, "k", false},
		{"empty secret", cloudapi.Sign(body, ""), body, "", false},
		{"empty header", "", body, "k", false},
	}
	for _, c := range cases {
		if got := cloudapi.VerifySignature(c.header, c.body, c.secret); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

// Several apps (or a rotation): a body signed under any of the secrets
// verifies, under none it does not, and empty secrets verify nothing.
func TestVerifySignatureAny(t *testing.T) {
	body := []byte(`{"a":1}`)
	for _, c := range []struct {
		name    string
		header  string
		secrets []string
		want    bool
	}{
		{"first of two", cloudapi.Sign(body, "old"), []string{"old", "new"}, true},
		{"second of two", cloudapi.Sign(body, "new"), []string{"old", "new"}, true},
		{"neither", cloudapi.Sign(body, "other"), []string{"old", "new"}, false},
		{"no secrets", cloudapi.Sign(body, ""), nil, false},
		{"only empty secrets", cloudapi.Sign(body, ""), []string{"", ""}, false},
		{"bad header", "sha256=zz", []string{"old"}, false},
	} {
		if got := cloudapi.VerifySignatureAny(c.header, body, c.secrets); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}
