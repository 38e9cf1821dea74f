package webhooksig_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wamux/wamux/webhooksig"
)

func newVerifier(t testing.TB, secrets ...string) *webhooksig.Verifier {
	t.Helper()
	v, err := webhooksig.NewVerifier(secrets...)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	return v
}

func headers(id, ts, sig string) http.Header {
	h := http.Header{}
	h.Set(webhooksig.HeaderID, id)
	h.Set(webhooksig.HeaderTimestamp, ts)
	h.Set(webhooksig.HeaderSignature, sig)
	return h
}

var vectorNow = time.Unix(vectorTS, 0)

func vectorHeaders() http.Header {
	return headers(vectorID, strconv.Itoa(vectorTS), vectorSig)
}

func TestVerifyAcceptsTheSpecificationVector(t *testing.T) {
	v := newVerifier(t, vectorSecret)
	if err := v.VerifyAt(vectorHeaders(), []byte(vectorBody), vectorNow); err != nil {
		t.Fatalf("VerifyAt: %v", err)
	}
}

func TestVerifyUsesTheCurrentTime(t *testing.T) {
	v := newVerifier(t, vectorSecret)
	if err := v.Verify(vectorHeaders(), []byte(vectorBody)); !errors.Is(err, webhooksig.ErrTimestamp) {
		t.Fatalf("Verify of a 2021 delivery = %v, want ErrTimestamp", err)
	}
	key := mustKey(t, vectorSecret)
	now := time.Now()
	h := headers(vectorID, strconv.FormatInt(now.Unix(), 10), webhooksig.Sign(key, vectorID, now, []byte(vectorBody)))
	if err := v.Verify(h, []byte(vectorBody)); err != nil {
		t.Fatalf("Verify of a fresh delivery: %v", err)
	}
}

func TestVerifyDuringRotation(t *testing.T) {
	oldSecret, newSecretS := vectorSecret, newSecret(t)
	oldKey, newKey := mustKey(t, oldSecret), mustKey(t, newSecretS)
	body := []byte(vectorBody)
	both := webhooksig.SignatureHeader([][]byte{newKey, oldKey}, vectorID, vectorNow, body)
	onlyNew := webhooksig.Sign(newKey, vectorID, vectorNow, body)
	onlyOld := webhooksig.Sign(oldKey, vectorID, vectorNow, body)
	third := newSecret(t)

	tests := []struct {
		name    string
		secrets []string
		sig     string
		want    error
	}{
		{"old receiver, both signatures", []string{oldSecret}, both, nil},
		{"new receiver, both signatures", []string{newSecretS}, both, nil},
		{"receiver with both, old signature", []string{newSecretS, oldSecret}, onlyOld, nil},
		{"receiver with both, new signature", []string{newSecretS, oldSecret}, onlyNew, nil},
		{"old receiver, new signature", []string{oldSecret}, onlyNew, webhooksig.ErrSignature},
		{"unrelated receiver, both signatures", []string{third}, both, webhooksig.ErrSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newVerifier(t, tt.secrets...)
			err := v.VerifyAt(headers(vectorID, strconv.Itoa(vectorTS), tt.sig), body, vectorNow)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("VerifyAt = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestVerifyRejectsTampering(t *testing.T) {
	ts := strconv.Itoa(vectorTS)
	tests := []struct {
		name string
		h    http.Header
		body string
		now  time.Time
	}{
		{"body", vectorHeaders(), `{"test": 2432232315}`, vectorNow},
		{"body with trailing newline", vectorHeaders(), vectorBody + "\n", vectorNow},
		{"id", headers(vectorID+"x", ts, vectorSig), vectorBody, vectorNow},
		{"timestamp", headers(vectorID, strconv.Itoa(vectorTS+1), vectorSig), vectorBody, vectorNow},
		{"timestamp with leading zero", headers(vectorID, "0"+ts, vectorSig), vectorBody, vectorNow},
		{"signature bit", headers(vectorID, ts, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA="), vectorBody, vectorNow},
		{"truncated signature", headers(vectorID, ts, vectorSig[:20]), vectorBody, vectorNow},
		{"unknown version", headers(vectorID, ts, "v2"+vectorSig[2:]), vectorBody, vectorNow},
		{"asymmetric version", headers(vectorID, ts, "v1a"+vectorSig[2:]), vectorBody, vectorNow},
		{"no version", headers(vectorID, ts, vectorSig[3:]), vectorBody, vectorNow},
		{"url alphabet", headers(vectorID, ts, strings.NewReplacer("+", "-", "/", "_").Replace(vectorSig)), vectorBody, vectorNow},
	}
	v := newVerifier(t, vectorSecret)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := v.VerifyAt(tt.h, []byte(tt.body), tt.now)
			if !errors.Is(err, webhooksig.ErrSignature) {
				t.Fatalf("VerifyAt = %v, want ErrSignature", err)
			}
		})
	}
}

func TestVerifyIgnoresUnknownEntriesBesideAValidOne(t *testing.T) {
	v := newVerifier(t, vectorSecret)
	sig := strings.Join([]string{
		"v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg==",
		"v2," + vectorSig[3:],
		"garbage",
		"v1,not-base64!",
		"v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",
		vectorSig,
	}, "  ")
	if err := v.VerifyAt(headers(vectorID, strconv.Itoa(vectorTS), sig), []byte(vectorBody), vectorNow); err != nil {
		t.Fatalf("VerifyAt: %v", err)
	}
}

func TestVerifyReadsEverySignatureHeaderValue(t *testing.T) {
	v := newVerifier(t, vectorSecret)
	h := vectorHeaders()
	h.Set(webhooksig.HeaderSignature, "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=")
	h.Add(webhooksig.HeaderSignature, vectorSig)
	if err := v.VerifyAt(h, []byte(vectorBody), vectorNow); err != nil {
		t.Fatalf("VerifyAt with the match in a second header line: %v", err)
	}
}

func TestVerifyTimestampTolerance(t *testing.T) {
	key := mustKey(t, vectorSecret)
	body := []byte(vectorBody)
	signedAt := func(ts time.Time) http.Header {
		return headers(vectorID, strconv.FormatInt(ts.Unix(), 10), webhooksig.Sign(key, vectorID, ts, body))
	}
	now := time.Unix(vectorTS, 0)
	custom := newVerifier(t, vectorSecret)
	custom.Tolerance = 10 * time.Second
	zero := newVerifier(t, vectorSecret)
	zero.Tolerance = 0

	tests := []struct {
		name string
		v    *webhooksig.Verifier
		sent time.Time
		now  time.Time
		ok   bool
	}{
		{"exactly 5m old", newVerifier(t, vectorSecret), now.Add(-5 * time.Minute), now, true},
		{"5m1s old", newVerifier(t, vectorSecret), now.Add(-5*time.Minute - time.Second), now, false},
		{"5m and a nanosecond old", newVerifier(t, vectorSecret), now.Add(-5 * time.Minute), now.Add(time.Nanosecond), false},
		{"exactly 5m ahead", newVerifier(t, vectorSecret), now.Add(5 * time.Minute), now, true},
		{"5m1s ahead", newVerifier(t, vectorSecret), now.Add(5*time.Minute + time.Second), now, false},
		{"custom tolerance inside", custom, now.Add(-10 * time.Second), now, true},
		{"custom tolerance outside", custom, now.Add(-11 * time.Second), now, false},
		{"zero tolerance means default, inside", zero, now.Add(-5 * time.Minute), now, true},
		{"zero tolerance means default, outside", zero, now.Add(-5*time.Minute - time.Second), now, false},
		{"unix epoch", newVerifier(t, vectorSecret), time.Unix(0, 0), now, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.v.VerifyAt(signedAt(tt.sent), body, tt.now)
			if tt.ok && err != nil {
				t.Fatalf("VerifyAt = %v, want nil", err)
			}
			if !tt.ok && !errors.Is(err, webhooksig.ErrTimestamp) {
				t.Fatalf("VerifyAt = %v, want ErrTimestamp", err)
			}
		})
	}
}

func TestVerifyRejectsMalformedTimestamps(t *testing.T) {
	v := newVerifier(t, vectorSecret)
	for _, ts := range []string{"-1", "+1614265330", "1614265330.5", " 1614265330", "0x60377a72", "1e9", "99999999999999999999", "٣"} {
		err := v.VerifyAt(headers(vectorID, ts, vectorSig), []byte(vectorBody), vectorNow)
		if !errors.Is(err, webhooksig.ErrTimestamp) {
			t.Errorf("timestamp %q: VerifyAt = %v, want ErrTimestamp", ts, err)
		}
	}
}

func TestVerifyRequiresAllThreeHeaders(t *testing.T) {
	v := newVerifier(t, vectorSecret)
	for _, name := range []string{webhooksig.HeaderID, webhooksig.HeaderTimestamp, webhooksig.HeaderSignature} {
		for _, how := range []string{"absent", "empty", "blank"} {
			h := vectorHeaders()
			switch how {
			case "absent":
				h.Del(name)
			case "empty":
				h.Set(name, "")
			case "blank":
				h.Set(name, "")
				if name == webhooksig.HeaderSignature {
					h.Set(name, "   ")
				}
			}
			err := v.VerifyAt(h, []byte(vectorBody), vectorNow)
			if !errors.Is(err, webhooksig.ErrMissingHeaders) || !strings.Contains(err.Error(), name) {
				t.Errorf("%s %s: VerifyAt = %v, want ErrMissingHeaders naming it", name, how, err)
			}
		}
	}
	if err := v.VerifyAt(nil, []byte(vectorBody), vectorNow); !errors.Is(err, webhooksig.ErrMissingHeaders) {
		t.Errorf("nil header: VerifyAt = %v, want ErrMissingHeaders", err)
	}
}

func TestNewVerifierRejectsBadSecrets(t *testing.T) {
	if _, err := webhooksig.NewVerifier(); err == nil {
		t.Error("NewVerifier() without secrets succeeded")
	}
	if _, err := webhooksig.NewVerifier(vectorSecret, "whsec_short"); err == nil {
		t.Error("NewVerifier with a bad second secret succeeded")
	}
	v := newVerifier(t, vectorSecret)
	if v.Tolerance != webhooksig.DefaultTolerance {
		t.Errorf("Tolerance = %v, want %v", v.Tolerance, webhooksig.DefaultTolerance)
	}
}
