package seal_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/wamux/wamux/internal/seal"
)

// testKey returns a distinct 32-byte key for each seed.
func testKey(seed byte) []byte {
	k := make([]byte, seal.KeySize)
	for i := range k {
		k[i] = seed*31 + byte(i)*7 + 1
	}
	return k
}

// idOf computes the key id the way the format defines it.
func idOf(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:4])
}

func b64(key []byte) string { return base64.StdEncoding.EncodeToString(key) }

func mustRing(t testing.TB, keys ...[]byte) *seal.Keyring {
	t.Helper()
	k, err := seal.New(keys...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return k
}

func mustSeal(t testing.TB, k *seal.Keyring, plain string) string {
	t.Helper()
	s, err := k.Seal(plain)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	return s
}

// sealedID returns the key id field of a sealed value.
func sealedID(t testing.TB, sealed string) string {
	t.Helper()
	parts := strings.Split(sealed, ":")
	if len(parts) != 4 {
		t.Fatalf("sealed value %q has %d fields, want 4", sealed, len(parts))
	}
	return parts[2]
}

// assertNoKeyText fails when text shows any of keys in a common encoding.
func assertNoKeyText(t *testing.T, text string, keys ...[]byte) {
	t.Helper()
	for _, k := range keys {
		for _, enc := range []string{
			base64.StdEncoding.EncodeToString(k),
			base64.RawURLEncoding.EncodeToString(k),
			hex.EncodeToString(k),
			string(k),
			fmt.Sprint(k),
		} {
			if strings.Contains(text, enc[:12]) {
				t.Fatalf("%q shows key material", text)
			}
		}
	}
}
