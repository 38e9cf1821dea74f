package webhooksig_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/wamux/wamux/webhooksig"
)

// FuzzVerify feeds arbitrary header values and bodies to Verify, which must
// never panic and must answer with nil or one of its sentinel errors; and a
// signature made by Sign for the fuzzed id and body always verifies.
func FuzzVerify(f *testing.F) {
	f.Add(vectorID, strconv.Itoa(vectorTS), vectorSig, []byte(vectorBody), int64(0))
	f.Add("", "", "", []byte(nil), int64(1))
	f.Add("msg.with.dots", "99999999999999999999", "v1, v1,, ,v1 v1a,x", []byte("{}"), int64(-400))
	f.Add("id", "-1", "v1,====", []byte{0, 0xff}, int64(300))
	v, err := webhooksig.NewVerifier(vectorSecret)
	if err != nil {
		f.Fatal(err)
	}
	key := mustKey(f, vectorSecret)
	now := time.Unix(vectorTS, 0)

	f.Fuzz(func(t *testing.T, id, ts, sig string, body []byte, skew int64) {
		h := http.Header{}
		h.Set(webhooksig.HeaderID, id)
		h.Set(webhooksig.HeaderTimestamp, ts)
		h.Set(webhooksig.HeaderSignature, sig)
		err := v.VerifyAt(h, body, now)
		if err != nil && !errors.Is(err, webhooksig.ErrMissingHeaders) && !errors.Is(err, webhooksig.ErrTimestamp) && !errors.Is(err, webhooksig.ErrSignature) {
			t.Fatalf("VerifyAt returned an unclassified error: %v", err)
		}

		if id == "" {
			return
		}
		sent := now.Add(time.Duration(skew%301) * time.Second)
		h.Set(webhooksig.HeaderTimestamp, strconv.FormatInt(sent.Unix(), 10))
		h.Set(webhooksig.HeaderSignature, sig+" "+webhooksig.Sign(key, id, sent, body))
		if err := v.VerifyAt(h, body, now); err != nil {
			t.Fatalf("VerifyAt of a signature made by Sign: %v", err)
		}
	})
}
