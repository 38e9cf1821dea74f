package webhooksig_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/wamux/wamux/webhooksig"
)

// The test vector of the Standard Webhooks reference libraries.
const (
	vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTS     = 1614265330
	vectorBody   = `{"test": 2432232314}`
	vectorSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func mustKey(t testing.TB, secret string) []byte {
	t.Helper()
	k, err := webhooksig.ParseSecret(secret)
	if err != nil {
		t.Fatalf("ParseSecret: %v", err)
	}
	return k
}

func TestSignReproducesTheSpecificationVector(t *testing.T) {
	got := webhooksig.Sign(mustKey(t, vectorSecret), vectorID, time.Unix(vectorTS, 0), []byte(vectorBody))
	if got != vectorSig {
		t.Fatalf("Sign = %q, want %q", got, vectorSig)
	}
}

func TestSignUsesWholeSecondsOfTheTimestamp(t *testing.T) {
	key := mustKey(t, vectorSecret)
	got := webhooksig.Sign(key, vectorID, time.Unix(vectorTS, 999_999_999), []byte(vectorBody))
	if got != vectorSig {
		t.Fatalf("Sign with sub-second part = %q, want %q", got, vectorSig)
	}
}

func TestSignatureHeaderSignsWithEveryKeyInOrder(t *testing.T) {
	k1, k2 := mustKey(t, vectorSecret), mustKey(t, newSecret(t))
	ts := time.Unix(vectorTS, 0)
	got := webhooksig.SignatureHeader([][]byte{k1, k2}, vectorID, ts, []byte(vectorBody))
	want := vectorSig + " " + webhooksig.Sign(k2, vectorID, ts, []byte(vectorBody))
	if got != want {
		t.Fatalf("SignatureHeader = %q, want %q", got, want)
	}
	if got := webhooksig.SignatureHeader(nil, vectorID, ts, nil); got != "" {
		t.Fatalf("SignatureHeader without keys = %q, want empty", got)
	}
}

func newSecret(t testing.TB) string {
	t.Helper()
	s, err := webhooksig.NewSecret()
	if err != nil {
		t.Fatalf("NewSecret: %v", err)
	}
	return s
}

func TestNewSecretIsPrefixedBase64Of32RandomBytes(t *testing.T) {
	a, b := newSecret(t), newSecret(t)
	if a == b {
		t.Fatalf("two secrets are equal: %q", a)
	}
	if !strings.HasPrefix(a, webhooksig.SecretPrefix) {
		t.Fatalf("secret %q lacks prefix %q", a, webhooksig.SecretPrefix)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(a, webhooksig.SecretPrefix))
	if err != nil || len(raw) != 32 {
		t.Fatalf("secret decodes to %d bytes (err %v), want 32", len(raw), err)
	}
	if k := mustKey(t, a); string(k) != string(raw) {
		t.Fatal("ParseSecret does not return the secret's bytes")
	}
}

func TestParseSecret(t *testing.T) {
	b24 := base64.StdEncoding.EncodeToString(make([]byte, 24))
	b23 := base64.StdEncoding.EncodeToString(make([]byte, 23))
	tests := []struct {
		name    string
		in      string
		wantLen int // 0: an error is expected
	}{
		{"prefixed", vectorSecret, 24},
		{"without prefix", strings.TrimPrefix(vectorSecret, "whsec_"), 24},
		{"24 bytes", b24, 24},
		{"23 bytes", b23, 0},
		{"empty", "", 0},
		{"prefix only", "whsec_", 0},
		{"not base64", "whsec_!!!!not-base64-at-all!!!!!!!!", 0},
		{"url alphabet", "whsec_" + strings.Repeat("-_", 16), 0},
		{"missing padding", "whsec_" + strings.TrimRight(base64.StdEncoding.EncodeToString(make([]byte, 25)), "="), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := webhooksig.ParseSecret(tt.in)
			if tt.wantLen == 0 {
				if err == nil {
					t.Fatalf("ParseSecret(%q) = %d bytes, want an error", tt.in, len(k))
				}
				return
			}
			if err != nil || len(k) != tt.wantLen {
				t.Fatalf("ParseSecret(%q) = %d bytes, %v; want %d bytes", tt.in, len(k), err, tt.wantLen)
			}
		})
	}
}

func TestParseSecretErrorDoesNotRepeatTheSecret(t *testing.T) {
	secret := "whsec_c2hvcnQ="
	_, err := webhooksig.ParseSecret(secret)
	if err == nil {
		t.Fatal("short secret accepted")
	}
	if strings.Contains(err.Error(), "c2hvcnQ") {
		t.Fatalf("error %q repeats the secret", err)
	}
}
