package seal_test

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"testing"

	"github.com/wamux/wamux/internal/seal"
)

// TestDeriveIsHKDFOfTheFirstKey: Derive is HKDF-SHA256 of the first key
// (no salt) for its info, so nodes given the same first key agree, a
// second key (a rotation's older one) changes nothing, and each purpose
// gets a key of its own that is not the secret key.
func TestDeriveIsHKDFOfTheFirstKey(t *testing.T) {
	first, older := testKey(1), testKey(2)
	got, err := mustRing(t, first).Derive("purpose a", 32)
	if err != nil {
		t.Fatal(err)
	}
	want, err := hkdf.Key(sha256.New, first, nil, "purpose a", 32)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Derive = %x, want HKDF-SHA256 %x", got, want)
	}
	if bytes.Equal(got, first) {
		t.Fatal("the derived key is the secret key")
	}
	if again, _ := mustRing(t, first, older).Derive("purpose a", 32); !bytes.Equal(again, got) {
		t.Fatal("a second key in the ring changed the derived key")
	}
	if other, _ := mustRing(t, first).Derive("purpose b", 32); bytes.Equal(other, got) {
		t.Fatal("two purposes derived one key")
	}
	if rotated, _ := mustRing(t, older, first).Derive("purpose a", 32); bytes.Equal(rotated, got) {
		t.Fatal("a new first key derived the old key")
	}
}

func TestDeriveRefusesNoKeyOrNoPurpose(t *testing.T) {
	if _, err := (&seal.Keyring{}).Derive("purpose", 32); err == nil {
		t.Fatal("a keyring without keys derived a key")
	}
	if _, err := mustRing(t, testKey(1)).Derive("", 32); err == nil {
		t.Fatal("Derive without a purpose succeeded")
	}
}
