package cloudapi_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/wamux/wamux/provider/cloudapi"
)

func errBody(code int, subcode int) []byte {
	if subcode != 0 {
		return fmt.Appendf(nil, `{"error":{"message":"(#%d) x","type":"OAuthException","code":%d,"error_subcode":%d,"fbtrace_id":"A"}}`, code, code, subcode)
	}
	return fmt.Appendf(nil, `{"error":{"message":"(#%d) x","type":"OAuthException","code":%d,"error_data":{"messaging_product":"whatsapp","details":"d"},"fbtrace_id":"A"}}`, code, code)
}

func TestClassifyTable(t *testing.T) {
	ok := []byte(`{"messaging_product":"whatsapp","contacts":[{"input":"1555","wa_id":"1555"}],"messages":[{"id":"wamid.X=","message_status":"accepted"}]}`)
	tests := []struct {
		name    string
		status  int
		body    []byte
		header  http.Header
		err     error
		outcome cloudapi.Outcome
		delay   time.Duration
		code    int
	}{
		{"accepted", 200, ok, nil, nil, cloudapi.Accepted, 0, -1},
		{"200 unreadable is unknown", 200, []byte(`{"messages":[]}`), nil, nil, cloudapi.Unknown, 0, -1},
		{"throughput 130429", 400, errBody(130429, 2494055), nil, nil, cloudapi.SlowDown, time.Second, 130429},
		{"throughput as 429", 429, errBody(130429, 0), nil, nil, cloudapi.SlowDown, time.Second, 130429},
		{"app limit 4", 400, errBody(4, 0), nil, nil, cloudapi.SlowDown, 30 * time.Second, 4},
		{"waba limit 80007", 400, errBody(80007, 0), nil, nil, cloudapi.SlowDown, time.Minute, 80007},
		{"pair 131056", 400, errBody(131056, 0), nil, nil, cloudapi.PairLimit, time.Second, 131056},
		{"spam 131048", 400, errBody(131048, 0), nil, nil, cloudapi.Cooldown, 2 * time.Minute, 131048},
		{"maintenance 131057", 500, errBody(131057, 0), nil, nil, cloudapi.Cooldown, time.Minute, 131057},
		{"policy 368", 403, errBody(368, 0), nil, nil, cloudapi.Disable, 0, 368},
		{"locked 131031", 403, errBody(131031, 0), nil, nil, cloudapi.Disable, 0, 131031},
		{"auth 0", 401, errBody(0, 0), nil, nil, cloudapi.Disable, 0, 0},
		{"token 190", 401, errBody(190, 0), nil, nil, cloudapi.Disable, 0, 190},
		{"permission 200", 403, errBody(200, 0), nil, nil, cloudapi.Disable, 0, 200},
		{"unknown number 100/33", 400, errBody(100, 33), nil, nil, cloudapi.Disable, 0, 100},
		{"deleted number 33", 400, errBody(33, 0), nil, nil, cloudapi.Disable, 0, 33},
		{"bad param 100", 400, errBody(100, 0), nil, nil, cloudapi.Permanent, 0, 100},
		{"undeliverable 131026", 400, errBody(131026, 0), nil, nil, cloudapi.Permanent, 0, 131026},
		{"reengagement 131047", 400, errBody(131047, 0), nil, nil, cloudapi.Permanent, 0, 131047},
		{"ecosystem 131049", 400, errBody(131049, 0), nil, nil, cloudapi.Permanent, 0, 131049},
		{"opted out 131050", 400, errBody(131050, 0), nil, nil, cloudapi.Permanent, 0, 131050},
		{"blocked 130403", 400, errBody(130403, 0), nil, nil, cloudapi.Permanent, 0, 130403},
		{"template 132000", 400, errBody(132000, 0), nil, nil, cloudapi.Permanent, 0, 132000},
		{"template 132016", 400, errBody(132016, 0), nil, nil, cloudapi.Permanent, 0, 132016},
		{"unknown 1", 500, errBody(1, 0), nil, nil, cloudapi.Unknown, 0, 1},
		{"unavailable 2", 503, errBody(2, 0), nil, nil, cloudapi.Unknown, 0, 2},
		{"went wrong 131000", 500, errBody(131000, 0), nil, nil, cloudapi.Unknown, 0, 131000},
		{"service 131016", 500, errBody(131016, 0), nil, nil, cloudapi.Unknown, 0, 131016},
		{"code beats status: 131056 on 500", 500, errBody(131056, 0), nil, nil, cloudapi.PairLimit, time.Second, 131056},
		{"unlisted code on 400", 400, errBody(987654, 0), nil, nil, cloudapi.Retry, time.Second, 987654},
		{"unlisted code on 502", 502, errBody(987654, 0), nil, nil, cloudapi.Unknown, 0, 987654},
		{"bare 502", 502, []byte("<html>bad gateway</html>"), nil, nil, cloudapi.Unknown, 0, -1},
		{"bare 429", 429, nil, nil, nil, cloudapi.SlowDown, time.Second, -1},
		{"bare 404", 404, nil, nil, nil, cloudapi.Retry, time.Second, -1},
		{"retry-after seconds", 400, errBody(130429, 0), http.Header{"Retry-After": {"7"}}, nil, cloudapi.SlowDown, 7 * time.Second, 130429},
		{"retry-after date", 503, nil, http.Header{
			"Retry-After": {"Wed, 21 Oct 2015 07:28:30 GMT"}, "Date": {"Wed, 21 Oct 2015 07:28:00 GMT"},
		}, nil, cloudapi.Unknown, 30 * time.Second, -1},
		{"retry-after garbage ignored", 400, errBody(131056, 0), http.Header{"Retry-After": {"soon"}}, nil, cloudapi.PairLimit, time.Second, 131056},
		{"retry-after ignored when accepted", 200, ok, http.Header{"Retry-After": {"9"}}, nil, cloudapi.Accepted, 0, -1},
		{"timeout", 0, nil, nil, fmt.Errorf("post: %w", context.DeadlineExceeded), cloudapi.Unknown, 0, -1},
		{"reset", 0, nil, nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, cloudapi.Unknown, 0, -1},
		{"body cut off", 200, []byte(`{"messa`), nil, errors.New("unexpected EOF"), cloudapi.Unknown, 0, -1},
		{"dial refused", 0, nil, nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, cloudapi.Retry, time.Second, -1},
		{"dns", 0, nil, nil, &net.DNSError{Err: "no such host", Name: "x"}, cloudapi.Retry, time.Second, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.header
			if h == nil {
				h = http.Header{}
			}
			r := cloudapi.Classify(tt.status, tt.body, h, tt.err)
			if r.Outcome != tt.outcome || r.Delay != tt.delay || r.Code != tt.code {
				t.Fatalf("got %v delay %v code %d (%q), want %v delay %v code %d", r.Outcome, r.Delay, r.Code, r.Reason, tt.outcome, tt.delay, tt.code)
			}
			if r.Outcome == cloudapi.Accepted && r.WAMID != "wamid.X=" {
				t.Fatalf("wamid = %q", r.WAMID)
			}
			if r.Outcome != cloudapi.Accepted && r.Reason == "" {
				t.Fatal("no reason for a failure")
			}
		})
	}
}

func TestPairBackoff(t *testing.T) {
	for hits, want := range []time.Duration{time.Second, 4 * time.Second, 16 * time.Second, 64 * time.Second, 256 * time.Second, 1024 * time.Second, 1024 * time.Second} {
		if got := cloudapi.PairBackoff(hits); got != want {
			t.Errorf("PairBackoff(%d) = %v, want %v", hits, got, want)
		}
	}
}

func TestOutcomeString(t *testing.T) {
	seen := map[string]bool{}
	for o := cloudapi.Accepted; o <= cloudapi.Unknown; o++ {
		s := o.String()
		if s == "invalid" || seen[s] {
			t.Fatalf("outcome %d has name %q", o, s)
		}
		seen[s] = true
	}
}

// TestClassifyOverloaded: a 503 without a recognised code says the
// provider is overloaded (reference §2: treat it as a throttle too), while
// its outcome stays unknown (§7: a 5xx may have been taken); a recognised
// code decides by itself, and other 5xx say nothing about load.
func TestClassifyOverloaded(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   []byte
		want   bool
	}{
		{"bare 503", 503, []byte("<html>Service Unavailable</html>"), true},
		{"503 with an unlisted code", 503, errBody(987654, 0), true},
		{"503 with code 2", 503, errBody(2, 0), false},
		{"503 with code 131056", 503, errBody(131056, 0), false},
		{"bare 502", 502, nil, false},
		{"bare 500", 500, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := cloudapi.Classify(tt.status, tt.body, http.Header{}, nil)
			if r.Overloaded != tt.want {
				t.Fatalf("overloaded = %v, want %v (outcome %v)", r.Overloaded, tt.want, r.Outcome)
			}
			if tt.want && r.Outcome != cloudapi.Unknown {
				t.Fatalf("outcome %v, want unknown: a 5xx may have been taken", r.Outcome)
			}
		})
	}
}

// TestListedCodeIsTheTableOnly: the codes metrics may use as label values
// are the table's own entries; the ranges classification also covers
// (200-299, 132000-132999), -1 (no code) and made-up codes are not.
func TestListedCodeIsTheTableOnly(t *testing.T) {
	for code, want := range map[int]bool{130429: true, 131056: true, 80007: true, cloudapi.AppRateLimitCode: true,
		0: true, 250: false, 132001: false, -1: false, 987654: false} {
		if got := cloudapi.ListedCode(code); got != want {
			t.Errorf("ListedCode(%d) = %v, want %v", code, got, want)
		}
	}
}

// TestReasonIsStorable: a Reason becomes the message's last_error, which
// PostgreSQL text refuses when it holds a NUL byte (the outcome's write
// then fails as invalid and is not retried, leaving the message sending);
// Meta's message and details may carry one as \u0000.
func TestReasonIsStorable(t *testing.T) {
	body := []byte(`{"error":{"message":"bad\u0000param","type":"OAuthException","code":131009,` +
		`"error_data":{"messaging_product":"whatsapp","details":"d\u0000x"},"fbtrace_id":"A"}}`)
	r := cloudapi.Classify(400, body, nil, nil)
	if strings.IndexByte(r.Reason, 0) >= 0 || !utf8.ValidString(r.Reason) {
		t.Fatalf("Reason = %q, want valid UTF-8 without NUL", r.Reason)
	}
	if r.Reason != "131009: badparam (dx)" {
		t.Fatalf("Reason = %q", r.Reason)
	}
}
