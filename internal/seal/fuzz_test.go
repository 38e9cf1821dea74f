package seal_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/wamux/wamux/internal/seal"
)

// FuzzOpen feeds arbitrary strings to Open, which must never panic and must
// answer with the plaintext or one of its sentinel errors; an unknown key's
// error names a well-formed id only. Sealing the fuzzed string and opening
// it gives it back.
func FuzzOpen(f *testing.F) {
	k := mustRing(f, testKey(1), testKey(2))
	other := mustRing(f, testKey(3))
	for _, s := range []string{
		mustSeal(f, k, "whsec_abc"),
		mustSeal(f, mustRing(f, testKey(2)), ""),
		mustSeal(f, other, "x"),
		"",
		"sealed:",
		"sealed:v1:",
		"sealed:v1:00000000:",
		"sealed:v1:00000000:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"sealed:v1:zzzzzzzz:AAAA",
		"sealed:v9:" + idOf(testKey(1)) + ":AAAA==",
		"sealed:v1:" + idOf(testKey(1)) + ":\x00\xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		plain, err := k.Open(s)
		switch {
		case err == nil:
			if !seal.IsSealed(s) {
				t.Fatalf("Open accepted %q, which IsSealed rejects", s)
			}
		case errors.Is(err, seal.ErrUnknownKey):
			id := strings.Split(s, ":")[2]
			if len(id) != 8 || !strings.Contains(err.Error(), id) {
				t.Fatalf("unknown key error %q for %q", err, s)
			}
		case !errors.Is(err, seal.ErrCorrupt):
			t.Fatalf("Open returned an unclassified error: %v", err)
		}
		if err != nil && plain != "" {
			t.Fatalf("Open returned %q with error %v", plain, err)
		}

		sealed := mustSeal(t, k, s)
		if got, err := k.Open(sealed); err != nil || got != s {
			t.Fatalf("Open(Seal(%q)) = %q, %v", s, got, err)
		}
	})
}
