package webhooksig

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// SecretPrefix marks a serialized symmetric signing secret.
const SecretPrefix = "whsec_"

// Secret sizes in bytes. The specification asks for at least 24 random bytes;
// NewSecret makes 32.
const (
	secretSize    = 32
	minSecretSize = 24
)

// NewSecret returns a fresh signing secret: SecretPrefix followed by the
// standard base64 encoding of 32 random bytes.
func NewSecret() (string, error) {
	b := make([]byte, secretSize)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("webhooksig: read random secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// ParseSecret returns the HMAC key a serialized secret holds. The SecretPrefix
// is optional; the rest is standard base64 of at least 24 bytes. Errors never
// repeat the secret.
func ParseSecret(s string) ([]byte, error) {
	enc := strings.TrimPrefix(s, SecretPrefix)
	if enc == "" {
		return nil, errors.New("webhooksig: empty secret")
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, errors.New("webhooksig: secret is not standard base64")
	}
	if len(key) < minSecretSize {
		return nil, fmt.Errorf("webhooksig: secret has %d bytes, want at least %d", len(key), minSecretSize)
	}
	return key, nil
}
