package webhooksig

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultTolerance is how far webhook-timestamp may be from the receiver's
// clock, either way, before a delivery counts as a replay or a forgery.
const DefaultTolerance = 5 * time.Minute

// maxTimestampDigits bounds webhook-timestamp so that it parses into an int64
// and converts to a time.Time without overflow.
const maxTimestampDigits = 18

// Errors Verify returns, wrapped with a detail; test them with errors.Is.
var (
	// ErrMissingHeaders: webhook-id, webhook-timestamp or webhook-signature is absent or empty.
	ErrMissingHeaders = errors.New("webhooksig: missing webhook headers")
	// ErrTimestamp: webhook-timestamp is not Unix seconds or is outside the tolerance.
	ErrTimestamp = errors.New("webhooksig: webhook timestamp rejected")
	// ErrSignature: no v1 signature matches any of the verifier's secrets.
	ErrSignature = errors.New("webhooksig: no matching signature")
)

// Verifier checks deliveries on the receiving side. Build it with
// NewVerifier; it is safe for concurrent use as long as Tolerance is not
// changed.
type Verifier struct {
	// Tolerance is the accepted distance between webhook-timestamp and the
	// receiver's clock, either way; zero or less means DefaultTolerance.
	Tolerance time.Duration

	keys [][]byte
}

// NewVerifier returns a Verifier that accepts a signature by any of secrets
// (several during a rotation), each in the form NewSecret returns, with or
// without SecretPrefix.
func NewVerifier(secrets ...string) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("webhooksig: verifier needs at least one secret")
	}
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		k, err := ParseSecret(s)
		if err != nil {
			return nil, fmt.Errorf("secret %d: %w", i+1, err)
		}
		keys[i] = k
	}
	return &Verifier{Tolerance: DefaultTolerance, keys: keys}, nil
}

// Verify checks the headers of a delivery against its raw body, as received,
// at the current time.
func (v *Verifier) Verify(h http.Header, body []byte) error {
	return v.VerifyAt(h, body, time.Now())
}

// VerifyAt is Verify with the receiver's clock reading now.
func (v *Verifier) VerifyAt(h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Values(HeaderSignature)
	if missing := missingHeaders(id, ts, sigs); missing != "" {
		return fmt.Errorf("%w: %s", ErrMissingHeaders, missing)
	}
	if err := v.checkTimestamp(ts, now); err != nil {
		return err
	}
	want := make([][]byte, len(v.keys))
	for i, k := range v.keys {
		want[i] = mac(k, id, ts, body)
	}
	for _, value := range sigs {
		for _, entry := range strings.Fields(value) {
			if matchesAny(entry, want) {
				return nil
			}
		}
	}
	return ErrSignature
}

// missingHeaders names the absent headers, or returns "" when all are there.
func missingHeaders(id, ts string, sigs []string) string {
	var missing []string
	if id == "" {
		missing = append(missing, HeaderID)
	}
	if ts == "" {
		missing = append(missing, HeaderTimestamp)
	}
	if strings.TrimSpace(strings.Join(sigs, "")) == "" {
		missing = append(missing, HeaderSignature)
	}
	return strings.Join(missing, ", ")
}

// checkTimestamp requires ts to be decimal Unix seconds within the tolerance of now.
func (v *Verifier) checkTimestamp(ts string, now time.Time) error {
	if len(ts) > maxTimestampDigits || strings.TrimLeft(ts, "0123456789") != "" {
		return fmt.Errorf("%w: not Unix seconds", ErrTimestamp)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: not Unix seconds", ErrTimestamp)
	}
	tol := v.Tolerance
	if tol <= 0 {
		tol = DefaultTolerance
	}
	switch d := now.Sub(time.Unix(sec, 0)); {
	case d > tol:
		return fmt.Errorf("%w: %s older than the tolerance", ErrTimestamp, d-tol)
	case d < -tol:
		return fmt.Errorf("%w: %s ahead of the tolerance", ErrTimestamp, -d-tol)
	}
	return nil
}

// matchesAny reports whether entry is a v1 signature equal to one of want,
// compared in constant time. Other versions and malformed entries never match.
func matchesAny(entry string, want [][]byte) bool {
	version, sig, ok := strings.Cut(entry, ",")
	if !ok || version != signatureVersion {
		return false
	}
	got, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return false
	}
	for _, w := range want {
		if hmac.Equal(got, w) {
			return true
		}
	}
	return false
}
