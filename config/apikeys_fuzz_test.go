package config

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/wamux/wamux/internal/apikey"
)

// FuzzAPIKeysEnv: whatever WAMUX_API_KEYS holds, Load either refuses it
// with an error that does not depend on the keys' text (the same keys
// written otherwise, of the same lengths, get the same error), or keeps every
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
			other, ok := otherKeys(v)
			if !ok {
				return
			}
			_, err2 := Load(nil, envOf(map[string]string{"WAMUX_API_KEYS": other}), io.Discard)
			if err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("the error depends on the keys' text: %q, with other keys %v", err, err2)
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

// otherKeys is v with each key replaced by digits of the same length,
// numbering the distinct keys: equal keys stay equal, distinct ones stay
// distinct, scopes and spacing stay as they are. It reports false when
// there are more distinct keys of a length than numbers of that many digits.
func otherKeys(v string) (string, bool) {
	parts := strings.Split(v, ",")
	index := map[string]int{}
	for i, p := range parts {
		secret, scopes, hasScopes := strings.Cut(p, ":")
		core := strings.TrimSpace(secret)
		if core == "" {
			continue
		}
		n, ok := index[core]
		if !ok {
			n = len(index)
			index[core] = n
		}
		other := fmt.Sprintf("%0*d", len(core), n)
		if len(other) > len(core) {
			return "", false
		}
		parts[i] = strings.Replace(secret, core, other, 1)
		if hasScopes {
			parts[i] += ":" + scopes
		}
	}
	return strings.Join(parts, ","), true
}
