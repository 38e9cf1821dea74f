package seal

import (
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
)

// Derive returns a key of length bytes for the purpose info, derived from
// the keyring's first key with HKDF-SHA256 (no salt): every process given
// the same first key derives the same key, each info a key of its own, and
// none of them reveals the first key. A rotation (a new first key) changes
// every derived key.
func (k *Keyring) Derive(info string, length int) ([]byte, error) {
	if len(k.prk) == 0 {
		return nil, errors.New("seal: keyring has no keys; build it with New")
	}
	if info == "" {
		return nil, errors.New("seal: derive needs a purpose (info)")
	}
	key, err := hkdf.Expand(sha256.New, k.prk, info, length)
	if err != nil {
		return nil, fmt.Errorf("seal: derive %q: %w", info, err)
	}
	return key, nil
}
