package seal_test

import (
	"bytes"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"

	"github.com/wamux/wamux/internal/seal"
)

// keysError is every error ParseKeys gives: none can hold an entry's text.
var keysError = regexp.MustCompile(`^seal: (no keys given|key [0-9]+ of [0-9]+: (empty entry|not base64|decodes to [0-9]+ bytes, want 32))$`)

// FuzzParseKeys: whatever WAMUX_SECRET_KEY holds, ParseKeys either refuses
// it with one of its own errors, which show no entry, or returns one key of
// KeySize bytes per comma-separated entry, in order, which read back the
// same from their standard base64 and make a keyring unless one is given twice.
func FuzzParseKeys(f *testing.F) {
	for _, s := range []string{
		b64(testKey(1)),
		b64(testKey(1)) + " , " + base64.RawURLEncoding.EncodeToString(testKey(2)),
		base64.URLEncoding.EncodeToString(testKey(3)) + "," + base64.RawStdEncoding.EncodeToString(testKey(4)),
		b64(testKey(1)) + ",",
		"", " ", ",", "AAAA", b64(testKey(1))[:43], b64(testKey(1)) + "==",
		b64(append(testKey(1), 0)),
		"not base64 at all!",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, env string) {
		keys, err := seal.ParseKeys(env)
		entries := strings.Split(env, ",")
		if err != nil {
			if !keysError.MatchString(err.Error()) {
				t.Fatalf("error %q is not one of ParseKeys' own", err)
			}
			if keys != nil {
				t.Fatalf("keys beside error %v", err)
			}
			return
		}
		if len(keys) != len(entries) {
			t.Fatalf("%d entries, %d keys", len(entries), len(keys))
		}
		std := make([]string, len(keys))
		for i, k := range keys {
			if len(k) != seal.KeySize {
				t.Fatalf("key %d has %d bytes", i, len(k))
			}
			std[i] = b64(k)
		}
		again, err := seal.ParseKeys(strings.Join(std, ","))
		if err != nil || len(again) != len(keys) {
			t.Fatalf("re-encoded keys: %d, %v", len(again), err)
		}
		for i := range keys {
			if !bytes.Equal(again[i], keys[i]) {
				t.Fatalf("key %d reads back otherwise", i)
			}
		}
		dup := false
		for i := range keys {
			for j := range i {
				dup = dup || bytes.Equal(keys[i], keys[j])
			}
		}
		if _, err := seal.New(keys...); (err != nil) != dup {
			t.Fatalf("keys (repeated: %v) make a keyring: %v", dup, err)
		}
	})
}
