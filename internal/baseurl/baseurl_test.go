package baseurl_test

import (
	"strings"
	"testing"

	"github.com/wamux/wamux/internal/baseurl"
)

func TestAllows(t *testing.T) {
	l := baseurl.MustParse("https://graph.facebook.com, http://127.0.0.1:8090 ,https://proxy.example.com/meta/,http://[::1]")
	cases := map[string]bool{
		"https://graph.facebook.com":             true,
		"https://graph.facebook.com/":            true,
		"https://GRAPH.facebook.com":             true,
		"https://graph.facebook.com:8443":        true, // no port in the entry: any port of the host
		"https://graph.facebook.com/v21.0":       true,
		"http://graph.facebook.com":              false, // scheme
		"https://graph.facebook.com.evil.com":    false,
		"https://evil.com/graph.facebook.com":    false,
		"https://graph.facebook.com@evil.com":    false,
		"https://user:pw@graph.facebook.com":     false,
		"http://127.0.0.1:8090":                  true,
		"http://127.0.0.1:8090/sim":              true,
		"http://127.0.0.1:8091":                  false, // the entry names a port
		"http://127.0.0.1":                       false, // :80 is not :8090
		"http://127.0.0.2:8090":                  false,
		"http://localhost:8090":                  false, // names are not resolved
		"https://proxy.example.com/meta":         true,
		"https://proxy.example.com/meta/v21.0":   true,
		"https://proxy.example.com/metadata":     false, // a prefix of a segment is not under it
		"https://proxy.example.com/":             false,
		"https://proxy.example.com/meta/../x":    false,
		"https://proxy.example.com/meta/%2e%2e/": false,
		"https://proxy.example.com:443/meta":     true,
		"http://[::1]:9999":                      true,
		"http://[::2]":                           false,
		"ftp://graph.facebook.com":               false,
		"graph.facebook.com":                     false,
		"":                                       false,
		"%zz":                                    false,
	}
	for raw, want := range cases {
		if got := l.Allows(raw); got != want {
			t.Errorf("Allows(%q) = %v, want %v", raw, got, want)
		}
	}
	if got := l.String(); got != "https://graph.facebook.com,http://127.0.0.1:8090,https://proxy.example.com/meta,http://[::1]" {
		t.Errorf("String() = %q", got)
	}
	if l.Len() != 4 {
		t.Errorf("Len() = %d", l.Len())
	}
}

// TestEntryWithPortMatchesDefaultPort: an entry's explicit default port
// is the URL's missing one, and the reverse.
func TestEntryWithPortMatchesDefaultPort(t *testing.T) {
	l := baseurl.MustParse("https://a.example:443,http://b.example")
	for raw, want := range map[string]bool{"https://a.example": true, "https://a.example:444": false, "http://b.example:80": true, "http://b.example:81": true} {
		if got := l.Allows(raw); got != want {
			t.Errorf("Allows(%q) = %v, want %v", raw, got, want)
		}
	}
}

func TestParseRefusals(t *testing.T) {
	for s, want := range map[string]string{
		"https://x.example,ftp://y.example":   "entry 2",
		"graph.facebook.com":                  "http or https",
		"https://":                            "no host",
		"https://x.example/?a=1":              "query",
		"https://x.example/#f":                "fragment",
		"https://x.example/a/../b":            "'..'",
		"https://admin:s3cret@x.example":      "credentials",
		"https://x.example, https://%zz.bad/": "entry 2",
	} {
		_, err := baseurl.Parse(s)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", s, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Parse(%q) shows the password: %v", s, err)
		}
	}
	if l, err := baseurl.Parse(" , "); err != nil || l.Len() != 0 || l.Allows("https://graph.facebook.com") {
		t.Errorf("an empty list: %v, %d entries", err, l.Len())
	}
}
