package apikey_test

import (
	"strings"
	"testing"

	"github.com/wamux/wamux/internal/apikey"
)

// FuzzParse: any entry parses or is refused without panicking; a refusal
// never shows the entry, and a parsed key has a non-empty secret without
// a colon and at least one scope.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"k1", "k2:send", "k3:read+send", ":", "k:", "k:send+", "k:a:b", " k : admin "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, entry string) {
		keys, err := apikey.Parse([]string{entry})
		if err != nil {
			if s := strings.TrimSpace(entry); len(s) >= 4 && strings.Contains(err.Error(), s) {
				t.Fatalf("error %q shows the entry", err)
			}
			return
		}
		k := keys[0]
		if k.Secret == "" || strings.Contains(k.Secret, ":") || k.Scopes == 0 || !apikey.All.Has(k.Scopes) {
			t.Fatalf("parsed %q into %v (%q)", entry, k, k.Secret)
		}
	})
}
