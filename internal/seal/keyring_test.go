package seal_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/wamux/wamux/internal/seal"
)

func TestSealOpenRoundTrip(t *testing.T) {
	k := mustRing(t, testKey(1))
	for _, plain := range []string{"", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "üñí\x00côdé\xff", strings.Repeat("x", 1<<16)} {
		sealed := mustSeal(t, k, plain)
		if !seal.IsSealed(sealed) {
			t.Errorf("IsSealed(%q) = false", sealed)
		}
		if strings.Contains(sealed, plain) && plain != "" {
			t.Errorf("sealed value shows the plaintext")
		}
		got, err := k.Open(sealed)
		if err != nil || got != plain {
			t.Errorf("Open(Seal(%.20q)) = %.20q, %v", plain, got, err)
		}
	}
}

func TestSealFormatNamesKeyAndUsesFreshNonces(t *testing.T) {
	key := testKey(1)
	k := mustRing(t, key)
	seen := map[string]bool{}
	for range 500 {
		sealed := mustSeal(t, k, "same")
		if want := "sealed:v1:" + idOf(key) + ":"; !strings.HasPrefix(sealed, want) {
			t.Fatalf("%q does not start with %q", sealed, want)
		}
		data, err := base64.RawURLEncoding.DecodeString(sealed[strings.LastIndex(sealed, ":")+1:])
		if err != nil {
			t.Fatalf("payload is not unpadded base64url: %v", err)
		}
		if len(data) != 12+len("same")+16 {
			t.Fatalf("payload has %d bytes, want nonce + plaintext + tag = %d", len(data), 12+4+16)
		}
		nonce := string(data[:12])
		if seen[nonce] {
			t.Fatal("a nonce repeated")
		}
		seen[nonce] = true
	}
}

// TestOpenAcceptsIndependentEncoding builds a value with AES-GCM directly,
// from the format's definition, and checks that the additional data must be
// the "sealed:v1:<id>" head.
func TestOpenAcceptsIndependentEncoding(t *testing.T) {
	key := testKey(2)
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	nonce := bytes.Repeat([]byte{9}, 12)
	head := "sealed:v1:" + idOf(key)
	build := func(aad string) string {
		data := gcm.Seal(append([]byte(nil), nonce...), nonce, []byte("token"), []byte(aad))
		return head + ":" + base64.RawURLEncoding.EncodeToString(data)
	}
	k := mustRing(t, key)
	if got, err := k.Open(build(head)); err != nil || got != "token" {
		t.Fatalf("Open = %q, %v; want token", got, err)
	}
	for _, aad := range []string{"", "sealed:v1:", "sealed:v2:" + idOf(key), "sealed:v1:" + idOf(testKey(3))} {
		if _, err := k.Open(build(aad)); !errors.Is(err, seal.ErrCorrupt) {
			t.Errorf("additional data %q: Open error = %v, want ErrCorrupt", aad, err)
		}
	}
}

func TestRotationOpensOldValuesAndSealsWithFirstKey(t *testing.T) {
	oldKey, newKey := testKey(1), testKey(2)
	before := mustRing(t, oldKey)
	oldSealed := mustSeal(t, before, "old secret")

	keys, err := seal.ParseKeys(b64(newKey) + "," + b64(oldKey))
	if err != nil {
		t.Fatal(err)
	}
	after := mustRing(t, keys...)
	if got, err := after.Open(oldSealed); err != nil || got != "old secret" {
		t.Fatalf("rotated keyring opens the old value as %q, %v", got, err)
	}
	newSealed := mustSeal(t, after, "new secret")
	if id := sealedID(t, newSealed); id != idOf(newKey) {
		t.Fatalf("rotated keyring seals with key %s, want the first key %s", id, idOf(newKey))
	}
	if got, err := after.Open(newSealed); err != nil || got != "new secret" {
		t.Fatalf("Open = %q, %v", got, err)
	}

	_, err = mustRing(t, newKey).Open(oldSealed)
	if !errors.Is(err, seal.ErrUnknownKey) {
		t.Fatalf("old value after the old key is dropped: %v, want ErrUnknownKey", err)
	}
	if !strings.Contains(err.Error(), idOf(oldKey)) {
		t.Errorf("error %q does not name the missing key id %s", err, idOf(oldKey))
	}
}

func TestOpenWithWrongKeyIsUnknownKey(t *testing.T) {
	sealed := mustSeal(t, mustRing(t, testKey(1)), "x")
	_, err := mustRing(t, testKey(2), testKey(3)).Open(sealed)
	if !errors.Is(err, seal.ErrUnknownKey) || errors.Is(err, seal.ErrCorrupt) {
		t.Fatalf("Open error = %v, want ErrUnknownKey only", err)
	}
	if !strings.Contains(err.Error(), idOf(testKey(1))) {
		t.Errorf("error %q does not name key id %s", err, idOf(testKey(1)))
	}
}

func TestTamperedValueIsCorrupt(t *testing.T) {
	key := testKey(1)
	k := mustRing(t, key, testKey(2))
	sealed := mustSeal(t, k, "a signing secret")
	cut := strings.LastIndex(sealed, ":")
	head, payload := sealed[:cut], sealed[cut+1:]
	data, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		t.Fatal(err)
	}

	// Every bit of nonce, ciphertext and tag is authenticated.
	for i := range data {
		for bit := range 8 {
			d := bytes.Clone(data)
			d[i] ^= 1 << bit
			s := head + ":" + base64.RawURLEncoding.EncodeToString(d)
			if _, err := k.Open(s); !errors.Is(err, seal.ErrCorrupt) {
				t.Fatalf("byte %d bit %d flipped: Open error = %v, want ErrCorrupt", i, bit, err)
			}
		}
	}
	// Every proper prefix of the value is refused.
	for n := range len(sealed) {
		if _, err := k.Open(sealed[:n]); !errors.Is(err, seal.ErrCorrupt) {
			t.Fatalf("value cut to %d chars: Open error = %v, want ErrCorrupt", n, err)
		}
	}
	id := idOf(key)
	for _, s := range []string{
		"Sealed:v1:" + id + ":" + payload,
		"sealed:v2:" + id + ":" + payload,
		"sealed:v1:" + strings.ToUpper(id) + ":" + payload,
		"sealed:v1:" + id + "0:" + payload,
		"sealed:v1:" + id + ":" + payload + "==",
		"sealed:v1:" + id + ":" + payload + "A",
		"sealed:v1:" + id + "::" + payload,
		"sealed:v1:" + id + ":" + strings.ReplaceAll(payload, "_", "/"),
		"sealed:v1:" + idOf(testKey(2)) + ":" + payload, // the other loaded key
		"x" + sealed,
		sealed + " ",
	} {
		if s == sealed {
			continue
		}
		if _, err := k.Open(s); !errors.Is(err, seal.ErrCorrupt) {
			t.Errorf("Open(%q) error = %v, want ErrCorrupt", s, err)
		}
	}
}

// TestKeysSharingAnIDBothOpen finds two keys whose ids collide and checks
// that Open tries each key with the value's id.
func TestKeysSharingAnIDBothOpen(t *testing.T) {
	a, b := collidingKeys(t)
	if idOf(a) != idOf(b) {
		t.Fatal("collidingKeys returned keys with different ids")
	}
	k := mustRing(t, a, b)
	fromB := mustSeal(t, mustRing(t, b), "sealed with b")
	if got, err := k.Open(fromB); err != nil || got != "sealed with b" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	fromA := mustSeal(t, k, "sealed with a")
	if got, err := mustRing(t, b, a).Open(fromA); err != nil || got != "sealed with a" {
		t.Fatalf("Open = %q, %v", got, err)
	}
}

// collidingKeys searches keys SHA-256("k" || i) for two with the same
// 32-bit id; the birthday bound makes that some 80,000 hashes.
func collidingKeys(t *testing.T) (a, b []byte) {
	seen := map[string][]byte{}
	for i := range 1 << 22 {
		sum := sha256.Sum256(fmt.Appendf(nil, "k%d", i))
		key := sum[:]
		id := idOf(key)
		if prev, ok := seen[id]; ok {
			return prev, key
		}
		seen[id] = key
	}
	t.Fatal("no id collision found")
	return nil, nil
}

func TestNewRefusesBadKeys(t *testing.T) {
	for name, keys := range map[string][][]byte{
		"none":      nil,
		"short":     {testKey(1)[:16]},
		"long":      {append(testKey(1), 0)},
		"empty":     {testKey(1), {}},
		"duplicate": {testKey(1), testKey(2), testKey(1)},
	} {
		k, err := seal.New(keys...)
		if err == nil || k != nil {
			t.Errorf("%s: New = %v, %v; want an error", name, k, err)
			continue
		}
		assertNoKeyText(t, err.Error(), testKey(1), testKey(2))
	}
}

func TestZeroKeyringSealFails(t *testing.T) {
	var k seal.Keyring
	if _, err := k.Seal("x"); err == nil {
		t.Fatal("a Keyring without keys sealed a value")
	}
	if _, err := k.Open(mustSeal(t, mustRing(t, testKey(1)), "x")); !errors.Is(err, seal.ErrUnknownKey) {
		t.Fatalf("Open error = %v, want ErrUnknownKey", err)
	}
}

func TestIsSealed(t *testing.T) {
	for s, want := range map[string]bool{
		"sealed:v1:0a1b2c3d:AAAA": true,
		"sealed:":                 true,
		"whsec_abc":               false,
		"":                        false,
		" sealed:v1:":             false,
		"SEALED:v1:":              false,
	} {
		if got := seal.IsSealed(s); got != want {
			t.Errorf("IsSealed(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestKeyringNeverPrintsKeys(t *testing.T) {
	keys := [][]byte{testKey(1), testKey(2)}
	k := mustRing(t, keys...)
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		out = append(out, fmt.Sprintf(verb, k), fmt.Sprintf(verb, *k))
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("loaded", "keyring", k, "value", *k)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("loaded", slog.Any("keyring", k))
	out = append(out, buf.String())
	for _, s := range out {
		if !strings.Contains(s, "seal.Keyring{keys:2}") {
			t.Errorf("%q does not show seal.Keyring{keys:2}", s)
		}
		assertNoKeyText(t, s, keys...)
	}
}

func TestConcurrentSealOpen(t *testing.T) {
	k := mustRing(t, testKey(1), testKey(2))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				plain := fmt.Sprintf("g%d-%d", g, i)
				s, err := k.Seal(plain)
				if err == nil {
					var got string
					got, err = k.Open(s)
					if err == nil && got != plain {
						err = fmt.Errorf("opened %q as %q", plain, got)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCurrentAndSealedKeyID(t *testing.T) {
	oldKey, newKey := testKey(1), testKey(2)
	oldSealed := mustSeal(t, mustRing(t, oldKey), "old secret")
	rotated := mustRing(t, newKey, oldKey)
	newSealed := mustSeal(t, rotated, "new secret")
	if rotated.Current(oldSealed) {
		t.Error("a value sealed with the second key counts as current")
	}
	if !rotated.Current(newSealed) {
		t.Error("a value sealed with the first key does not count as current")
	}
	if id, ok := seal.SealedKeyID(oldSealed); !ok || id != idOf(oldKey) {
		t.Errorf("SealedKeyID = %q, %v, want %s", id, ok, idOf(oldKey))
	}
	for _, s := range []string{"", "plain-token", "sealed:v1:", "sealed:v1:ABCDEF12:x", "sealed:v2:" + idOf(newKey) + ":x", "sealed:v1:" + idOf(newKey)} {
		if id, ok := seal.SealedKeyID(s); ok {
			t.Errorf("SealedKeyID(%q) = %q, true; want false", s, id)
		}
		if rotated.Current(s) {
			t.Errorf("Current(%q) = true", s)
		}
	}
	if (&seal.Keyring{}).Current(newSealed) {
		t.Error("an empty keyring calls a value current")
	}
}
