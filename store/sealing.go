package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/wamux/wamux/internal/seal"
)

// Sealer encrypts the secrets a store keeps at rest: the accounts' access
// tokens. *seal.Keyring implements it. A store opened with a nil Sealer
// keeps access tokens in plaintext and cannot read sealed ones.
type Sealer interface {
	// Seal encrypts plain under the current key.
	Seal(plain string) (string, error)
	// Open decrypts a value Seal returned under any key it holds; its
	// errors name the key id, never the value.
	Open(sealed string) (string, error)
	// Current reports whether sealed was sealed under the current key.
	Current(sealed string) bool
}

// SealToken returns the text a store writes for the access token plain:
// plain itself with a nil Sealer.
func SealToken(s Sealer, plain string) (string, error) {
	if s == nil {
		return plain, nil
	}
	sealed, err := s.Seal(plain)
	if err != nil {
		return "", fmt.Errorf("store: seal access token: %w", err)
	}
	return sealed, nil
}

// OpenToken returns the access token of account id from the text stored
// for it. A plaintext token (stored without a Sealer) is returned as it is.
// Errors name the account and the key id, never the token.
func OpenToken(s Sealer, id, stored string) (string, error) {
	if !seal.IsSealed(stored) {
		return stored, nil
	}
	if s == nil {
		keyID, _ := seal.SealedKeyID(stored)
		return "", fmt.Errorf("store: the access token of account %q is sealed under key id %s, and the store was opened without a secret key (WAMUX_SECRET_KEY)", id, keyID)
	}
	plain, err := s.Open(stored)
	if err != nil {
		return "", fmt.Errorf("store: the access token of account %q cannot be read: %w", id, err)
	}
	return plain, nil
}

// StoredToken is one account's access token as the store holds it.
type StoredToken struct {
	AccountID string
	Stored    string
}

// SealCounts counts what SealTokens wrote: plaintext tokens it sealed, and
// tokens sealed under an older key that it sealed again under the current
// one.
type SealCounts struct {
	Sealed, Resealed int
}

// ReplaceToken stores next as account id's token when the stored text is
// still prev, and does nothing otherwise (the account was written or
// deleted meanwhile, and that write sealed it).
type ReplaceToken func(ctx context.Context, id, prev, next string) error

// SealTokens brings every stored token under s's current key, the pass a
// store runs when it opens: a plaintext token is sealed, one sealed under
// an older key of a rotation is sealed again, each through replace. Every
// sealed token must open: those that do not (their key is not in s, or s
// is nil) make the error, which names each account and key id. With a nil
// Sealer or a nil replace nothing is written: a store another gateway
// serves is only checked, since that gateway's keys may not open what a
// new key would seal.
func SealTokens(ctx context.Context, s Sealer, rows []StoredToken, replace ReplaceToken) (SealCounts, error) {
	var n SealCounts
	var errs []error
	for _, r := range rows {
		plain, err := OpenToken(s, r.AccountID, r.Stored)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if s == nil || replace == nil || (seal.IsSealed(r.Stored) && s.Current(r.Stored)) {
			continue
		}
		next, err := SealToken(s, plain)
		if err != nil {
			return n, err
		}
		if err := replace(ctx, r.AccountID, r.Stored, next); err != nil {
			return n, fmt.Errorf("store: seal the access token of account %q: %w", r.AccountID, err)
		}
		if seal.IsSealed(r.Stored) {
			n.Resealed++
		} else {
			n.Sealed++
		}
	}
	return n, errors.Join(errs...)
}

// SealPatchToken is SealToken for the optional token of an AccountPatch.
func SealPatchToken(s Sealer, plain *string) (*string, error) {
	if plain == nil {
		return nil, nil
	}
	sealed, err := SealToken(s, *plain)
	if err != nil {
		return nil, err
	}
	return &sealed, nil
}
