package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// KeySize is the length of every key in bytes (AES-256).
const KeySize = 32

// Prefix starts every value Seal returns; IsSealed tests for it.
const Prefix = "sealed:"

const (
	version   = "v1"
	idLen     = 8 // hex digits of the key id
	nonceSize = 12
	tagSize   = 16
)

// Errors Open returns, wrapped with a detail; test them with errors.Is.
var (
	// ErrUnknownKey: the value was sealed with a key the keyring does not hold.
	ErrUnknownKey = errors.New("seal: sealed with a key that is not configured")
	// ErrCorrupt: the value is malformed or fails authentication.
	ErrCorrupt = errors.New("seal: sealed value is corrupt")
)

// Keyring seals with its first key and opens with any of its keys. It is safe
// for concurrent use. Its String, GoString and LogValue show the number of
// keys, never their bytes.
type Keyring struct {
	entries []entry
	prk     []byte // HKDF-Extract of the first key, for Derive
}

type entry struct {
	id   string
	aead cipher.AEAD // nonce || ciphertext || tag, random 12-byte nonce
}

// New returns a keyring whose first key seals and whose keys all open. Each
// key must be KeySize bytes; no two may be equal.
func New(keys ...[]byte) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("seal: keyring needs at least one key")
	}
	entries := make([]entry, len(keys))
	for i, key := range keys {
		if len(key) != KeySize {
			return nil, fmt.Errorf("seal: key %d has %d bytes, want %d", i+1, len(key), KeySize)
		}
		for j := range i {
			if string(keys[j]) == string(key) {
				return nil, fmt.Errorf("seal: keys %d and %d are the same key", j+1, i+1)
			}
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("seal: key %d: %w", i+1, err)
		}
		aead, err := cipher.NewGCMWithRandomNonce(block)
		if err != nil {
			return nil, fmt.Errorf("seal: key %d: %w", i+1, err)
		}
		entries[i] = entry{id: keyID(key), aead: aead}
	}
	// The pseudorandom key Derive expands, so the keyring keeps no copy
	// of the raw key.
	prk, err := hkdf.Extract(sha256.New, keys[0], nil)
	if err != nil {
		return nil, fmt.Errorf("seal: key 1: %w", err)
	}
	return &Keyring{entries: entries, prk: prk}, nil
}

// keyID is the first 8 hex digits of the SHA-256 of key.
func keyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:])[:idLen]
}

// IsSealed reports whether s has the form Seal returns, judged by its
// prefix, so a store can tell sealed values from plaintext ones it has yet to
// seal.
func IsSealed(s string) bool { return strings.HasPrefix(s, Prefix) }

// Seal encrypts plain with the keyring's first key.
func (k *Keyring) Seal(plain string) (string, error) {
	if len(k.entries) == 0 {
		return "", errors.New("seal: keyring has no keys; build it with New")
	}
	e := k.entries[0]
	head := Prefix + version + ":" + e.id
	data := e.aead.Seal(nil, nil, []byte(plain), []byte(head))
	return head + ":" + base64.RawURLEncoding.EncodeToString(data), nil
}

// Open decrypts a value Seal returned with any key of the keyring. A value
// sealed with a key the keyring lacks yields ErrUnknownKey naming the key id;
// a malformed or altered value yields ErrCorrupt.
func (k *Keyring) Open(sealed string) (string, error) {
	rest, ok := strings.CutPrefix(sealed, Prefix)
	if !ok {
		return "", fmt.Errorf("%w: missing %q prefix", ErrCorrupt, Prefix)
	}
	ver, rest, ok := strings.Cut(rest, ":")
	if !ok || ver != version {
		return "", fmt.Errorf("%w: unsupported format version", ErrCorrupt)
	}
	id, payload, ok := strings.Cut(rest, ":")
	if !ok || !validID(id) {
		return "", fmt.Errorf("%w: malformed key id", ErrCorrupt)
	}
	data, err := base64.RawURLEncoding.Strict().DecodeString(payload)
	if err != nil || len(data) < nonceSize+tagSize {
		return "", fmt.Errorf("%w: malformed payload", ErrCorrupt)
	}
	head := sealed[:len(sealed)-len(payload)-1]
	known := false
	for _, e := range k.entries {
		if e.id != id {
			continue
		}
		known = true
		if plain, err := e.aead.Open(nil, nil, data, []byte(head)); err == nil {
			return string(plain), nil
		}
	}
	if !known {
		return "", fmt.Errorf("%w: key id %s (add that key to WAMUX_SECRET_KEY)", ErrUnknownKey, id)
	}
	return "", fmt.Errorf("%w: authentication failed under key %s", ErrCorrupt, id)
}

// validID reports whether id is idLen lowercase hex digits.
func validID(id string) bool {
	if len(id) != idLen {
		return false
	}
	for i := range len(id) {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// String shows the number of keys only.
func (k Keyring) String() string { return fmt.Sprintf("seal.Keyring{keys:%d}", len(k.entries)) }

// GoString keeps %#v from printing the key schedules.
func (k Keyring) GoString() string { return k.String() }

// LogValue keeps slog handlers from printing the key schedules.
func (k Keyring) LogValue() slog.Value { return slog.StringValue(k.String()) }

// SealedKeyID returns the key id a sealed value names, and false when s is
// not a well-formed sealed value's head.
func SealedKeyID(s string) (string, bool) {
	rest, ok := strings.CutPrefix(s, Prefix+version+":")
	if !ok {
		return "", false
	}
	id, _, ok := strings.Cut(rest, ":")
	if !ok || !validID(id) {
		return "", false
	}
	return id, true
}

// Current reports whether sealed names the key Seal uses, so a value sealed
// under an older key of a rotation can be sealed again.
func (k *Keyring) Current(sealed string) bool {
	id, ok := SealedKeyID(sealed)
	return ok && len(k.entries) > 0 && id == k.entries[0].id
}
