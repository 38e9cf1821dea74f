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
	if appSecret == "" {
		return false
	}
	hexSig, ok := strings.CutPrefix(strings.TrimSpace(header), signaturePrefix)
	if !ok || len(hexSig) != 2*sha256.Size {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, []byte(appSecret))
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
}
