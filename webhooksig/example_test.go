package webhooksig_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/wamux/wamux/webhooksig"
)

// A receiver checks every delivery against the raw body before it trusts the
// event, and answers 401 when the check fails.
func Example() {
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // as shown when the subscription was made
	verifier, err := webhooksig.NewVerifier(secret)
	if err != nil {
		panic(err)
	}
	receiver := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		if err := verifier.Verify(r.Header, body); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		// Deduplicate on r.Header.Get(webhooksig.HeaderID), then handle body.
		w.WriteHeader(http.StatusNoContent)
	})

	// What a sender does for one delivery.
	body := `{"type":"message.status","data":{"status":"delivered"}}`
	key, _ := webhooksig.ParseSecret(secret)
	now := time.Now()
	req := httptest.NewRequest(http.MethodPost, "/events", strings.NewReader(body))
	req.Header.Set(webhooksig.HeaderID, "evt_1")
	req.Header.Set(webhooksig.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(webhooksig.HeaderSignature, webhooksig.Sign(key, "evt_1", now, []byte(body)))

	rec := httptest.NewRecorder()
	receiver.ServeHTTP(rec, req)
	fmt.Println(rec.Code)

	forged := req.Clone(req.Context())
	forged.Body = io.NopCloser(strings.NewReader(`{"type":"message.status","data":{"status":"read"}}`))
	rec = httptest.NewRecorder()
	receiver.ServeHTTP(rec, forged)
	fmt.Println(rec.Code)
	// Output:
	// 204
	// 401
}
