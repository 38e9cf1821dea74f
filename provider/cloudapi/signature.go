package cloudapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// SignatureHeader is the header Meta signs webhook bodies in.
const SignatureHeader = "X-Hub-Signature-256"

const signaturePrefix = "sha256="

// Sign returns the X-Hub-Signature-256 value for body: "sha256=" and the
// lowercase hex HMAC-SHA256 of the raw bytes keyed by the app secret.
func Sign(body []byte, appSecret string) string {
	m := hmac.New(sha256.New, []byte(appSecret))
	m.Write(body)
	return signaturePrefix + hex.EncodeToString(m.Sum(nil))
}

// VerifySignature reports whether header is a valid signature of the raw
// body under appSecret. It compares in constant time, and an empty secret
// verifies nothing, so a missing configuration fails closed.
func VerifySignature(header string, body []byte, appSecret string) bool {
	return VerifySignatureAny(header, body, []string{appSecret})
}

// VerifySignatureAny is VerifySignature for a gateway that takes webhooks
// of several Meta apps, each signing with its own app secret (or of one
// app during a secret rotation): the body verifies if it is signed under
// any of the secrets. Empty secrets verify nothing.
func VerifySignatureAny(header string, body []byte, appSecrets []string) bool {
	hexSig, ok := strings.CutPrefix(strings.TrimSpace(header), signaturePrefix)
	if !ok || len(hexSig) != 2*sha256.Size {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	for _, secret := range appSecrets {
		if secret == "" {
			continue
		}
		m := hmac.New(sha256.New, []byte(secret))
		m.Write(body)
		if hmac.Equal(got, m.Sum(nil)) {
			return true
		}
	}
	return false
}
