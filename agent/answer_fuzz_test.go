package agent

import (
	"encoding/json"
	"math"
	"math/big"
	"testing"
	"time"
)

// FuzzParseAnswer: whatever a gateway (or a proxy in its place) answers,
// reading its Retry-After and error body never panics; a delay is never
// negative, is the header's whole seconds when they fit in a Duration and
// the longest Duration when they do not; an error envelope's code and
// message are returned as sent.
func FuzzParseAnswer(f *testing.F) {
	f.Add("1", []byte(`{"error":{"code":"rate_limited","message":"slow down","retry_after":1}}`))
	f.Add("120", []byte(`{"error":{"code":"unavailable","message":"the store is not answering"}}`))
	f.Add("", []byte(`<html>502 Bad Gateway</html>`))
	f.Add("0", []byte(`{"error":"boom"}`))
	f.Add("-5", []byte(`{"error":{"code":7}}`))
	f.Add("Wed, 21 Oct 2015 07:28:00 GMT", []byte(`{"error":null}`))
	f.Add(" 5", []byte(`{"error":{"code":"invalid","message":"\ud800"}}`))
	f.Add("+3", []byte(``))
	f.Fuzz(func(t *testing.T, retryAfter string, body []byte) {
		d := parseRetryAfter(retryAfter)
		n, ok := new(big.Int).SetString(retryAfter, 10)
		switch {
		case !ok || n.Sign() <= 0:
			if d != 0 {
				t.Fatalf("Retry-After %q read as %v", retryAfter, d)
			}
		case n.Cmp(big.NewInt(math.MaxInt64/int64(time.Second))) > 0:
			if d != math.MaxInt64 {
				t.Fatalf("Retry-After %q read as %v, want the longest Duration", retryAfter, d)
			}
		case d != time.Duration(n.Int64())*time.Second:
			t.Fatalf("Retry-After %q read as %v", retryAfter, d)
		}

		code, message := parseError(body)
		var er errorResponse
		if json.Unmarshal(body, &er) != nil {
			er = errorResponse{}
		}
		if code != er.Error.Code || message != er.Error.Message {
			t.Fatalf("%q: code %q message %q, want %q %q", body, code, message, er.Error.Code, er.Error.Message)
		}
	})
}
