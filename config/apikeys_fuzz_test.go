package config

import (
	"io"
	"strings"
	"testing"

	"github.com/wamux/wamux/internal/apikey"
)

// FuzzAPIKeysEnv: whatever WAMUX_API_KEYS holds, Load either refuses it
// with an error that shows no key of 8 characters or more, or keeps every
// non-blank entry, trimmed and in order, each a key of at least 8
// characters that parses.
func FuzzAPIKeysEnv(f *testing.F) {
	for _, s := range []string{"key-one-1,key-two-2:send,key-three:read+send", " s3cret-key-9 : admin , ,x", "s3cret-key-9:send,s3cret-key-9:read",
		"good-key-1,:send", "s3cret:send", ",,,", "k\x00ey-long-enough", "key-é-unicode:read+read"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		c, err := Load(nil, envOf(map[string]string{"WAMUX_API_KEYS": v}), io.Discard)
		var entries []string
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				entries = append(entries, e)
			}
		}
		if err != nil {
			for _, e := range entries {
				secret, _, _ := strings.Cut(e, ":")
				if secret = strings.TrimSpace(secret); len(secret) >= 8 && strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q shows a key", err)
				}
			}
			return
		}
		if len(entries) == 0 {
			return // unset: the defaults apply
		}
		if len(c.APIKeys) != len(entries) {
			t.Fatalf("%q kept as %q", v, c.APIKeys)
		}
		keys, err := apikey.Parse(c.APIKeys)
		if err != nil {
			t.Fatalf("%q accepted, but its keys do not parse: %v", v, err)
		}
		for i, k := range keys {
			if c.APIKeys[i] != entries[i] || len(k.Secret) < 8 {
				t.Fatalf("%q kept entry %d as %q (key of %d bytes)", v, i, c.APIKeys[i], len(k.Secret))
			}
		}
	})
}
