package cloudapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Delays implied by each class. Meta documents only the pair-limit schedule
// (4^X s) and the maintenance window (up to a minute); the rest are our
// starting points, which the dispatcher may stretch with its own backoff.
const (
	RetryDelay       = 1 * time.Second  // nothing sent, transient
	ThroughputDelay  = 1 * time.Second  // 130429: per-number mps, clears within a second
	AppLimitDelay    = 30 * time.Second // 4: app-wide Graph rate limit
	WABALimitDelay   = 60 * time.Second // 80007: hourly WABA window
	PairLimitDelay   = 1 * time.Second  // 131056: 4^0 s, see PairBackoff
	MaintenanceDelay = 60 * time.Second // 131057: throughput upgrade takes ≤ 1 min
	SpamCooldown     = 2 * time.Minute  // 131048 and 131064: quality restrictions
	pairBackoffCap   = 1024 * time.Second
)

// AppRateLimitCode is Meta's code 4: the app reached its Graph API call
// limit. The limit is the app's, shared by every number it sends for, so
// the whole app backs off (reference §2), not only the number that hit it.
const AppRateLimitCode = 4

// PairBackoff is Meta's pair-limit schedule: after the hits-th consecutive
// 131056 for one recipient (counting from 0), wait 4^hits seconds. The
// client cannot know how many hits came before, so Classify uses hits = 0;
// the dispatcher, which counts them per recipient, calls this.
func PairBackoff(hits int) time.Duration {
	if hits < 0 {
		hits = 0
	}
	d := time.Second
	for i := 0; i < hits && d < pairBackoffCap; i++ {
		d *= 4
	}
	return min(d, pairBackoffCap)
}

// class is one row of the code table.
type class struct {
	outcome Outcome
	delay   time.Duration
}

// codeClasses maps Meta's error.code to an outcome. Meta advises keying on
// the code rather than the HTTP status, which sources disagree on.
var codeClasses = map[int]class{
	// Rate limits: rejected before sending.
	130429:           {SlowDown, ThroughputDelay},
	AppRateLimitCode: {SlowDown, AppLimitDelay},
	80007:            {SlowDown, WABALimitDelay},
	131056:           {PairLimit, PairLimitDelay},
	// Account-wide pauses.
	131048: {Cooldown, SpamCooldown},
	131057: {Cooldown, MaintenanceDelay},
	131064: {Cooldown, SpamCooldown},
	// The account cannot send until someone fixes it.
	368:    {Disable, 0}, // policy block
	131031: {Disable, 0}, // account locked
	0:      {Disable, 0}, // auth exception
	190:    {Disable, 0}, // token invalid or expired
	3:      {Disable, 0}, // app lacks the capability
	10:     {Disable, 0}, // permission denied
	131005: {Disable, 0}, // access denied
	131042: {Disable, 0}, // payment problem on the account
	133010: {Disable, 0}, // number not registered
	// "Invalid ID": the business phone number (or its WABA) was deleted,
	// or the token lacks access to it. Like 100/33 below, no message can
	// fix it, and failing the account's messages one by one would only
	// burn them: stop the account and route its recipients elsewhere.
	33: {Disable, 0},
	// This message will never go through as it is.
	100:    {Permanent, 0},
	131008: {Permanent, 0},
	131009: {Permanent, 0},
	131021: {Permanent, 0},
	131026: {Permanent, 0},
	131047: {Permanent, 0},
	131049: {Permanent, 0},
	131050: {Permanent, 0},
	131051: {Permanent, 0},
	131052: {Permanent, 0},
	131053: {Permanent, 0},
	130403: {Permanent, 0},
	// Meta failed in a way that says nothing about whether it sent.
	1:      {Unknown, 0},
	2:      {Unknown, 0},
	131000: {Unknown, 0},
	131016: {Unknown, 0},
}

// classOf looks a code up, covering the ranges the table cannot list.
func classOf(code int) (class, bool) {
	if c, ok := codeClasses[code]; ok {
		return c, true
	}
	switch {
	case code >= 200 && code <= 299: // permission family
		return class{Disable, 0}, true
	case code >= 132000 && code <= 132999: // template problems
		return class{Permanent, 0}, true
	}
	return class{}, false
}

// ListedCode reports whether the code table names code itself (the ranges
// classOf also covers are not listed). Metrics keep only such codes as
// label values: a code comes from the provider's answer, and a provider or
// proxy sending arbitrary ones must not create a series per code.
func ListedCode(code int) bool {
	_, ok := codeClasses[code]
	return ok
}

// apiErrorBody is Meta's error envelope. Code is a pointer because 0 is a
// real code (auth failure) and must not be confused with "absent".
type apiErrorBody struct {
	Error *struct {
		Message   string `json:"message"`
		Type      string `json:"type"`
		Code      *int   `json:"code"`
		Subcode   int    `json:"error_subcode"`
		ErrorData struct {
			Details string `json:"details"`
		} `json:"error_data"`
	} `json:"error"`
}

// sendResponse is the success body of POST /messages.
type sendResponse struct {
	Messages []struct {
		ID            string `json:"id"`
		MessageStatus string `json:"message_status"`
	} `json:"messages"`
}

// Classify turns one attempt's result into an Outcome. It is pure (given
// the header's Date for HTTP-date Retry-After values) so that it can be
// table-tested and fuzzed. transportErr is the error from the HTTP round
// trip or from reading the body; status and body are then whatever arrived.
func Classify(status int, body []byte, header http.Header, transportErr error) Result {
	r := classify(status, body, transportErr)
	r.HTTPStatus = status
	if status == http.StatusServiceUnavailable && transportErr == nil {
		_, known := classOf(r.Code)
		r.Overloaded = r.Code == -1 || !known
	}
	if r.Outcome != Accepted {
		if d, ok := retryAfter(header); ok {
			r.Delay = d
		}
	}
	return r
}

func classify(status int, body []byte, transportErr error) Result {
	if transportErr != nil {
		return classifyTransport(status, transportErr)
	}
	var e apiErrorBody
	if json.Unmarshal(body, &e) == nil && e.Error != nil && e.Error.Code != nil {
		code := *e.Error.Code
		r := Result{Code: code, Subcode: e.Error.Subcode, Reason: reason(code, e.Error.Message, e.Error.ErrorData.Details)}
		r.Err = fmt.Errorf("cloud api: http %d: code %d", status, code)
		c, ok := classOf(code)
		switch {
		case ok && code == 100 && e.Error.Subcode == 33:
			// "Object with ID … does not exist": the phone_number_id
			// itself is wrong, which no message can fix.
			r.Outcome = Disable
		case ok:
			r.Outcome, r.Delay = c.outcome, c.delay
		case status >= 500 || (status >= 200 && status < 300):
			r.Outcome = Unknown
		case status == http.StatusTooManyRequests:
			r.Outcome, r.Delay = SlowDown, ThroughputDelay
		default:
			// An unlisted code on a 4xx: Meta refused the request, so
			// nothing was sent; a bounded retry is the safe default.
			r.Outcome, r.Delay = Retry, RetryDelay
		}
		return r
	}
	if status >= 200 && status < 300 {
		var s sendResponse
		if json.Unmarshal(body, &s) == nil && len(s.Messages) > 0 && s.Messages[0].ID != "" {
			return Result{Outcome: Accepted, WAMID: s.Messages[0].ID, MessageStatus: s.Messages[0].MessageStatus, Code: -1}
		}
		// A 2xx we cannot read may well be an accepted message.
		return Result{Outcome: Unknown, Code: -1, Reason: "unreadable success response", Err: fmt.Errorf("cloud api: http %d without a message id", status)}
	}
	r := Result{Code: -1, Err: fmt.Errorf("cloud api: http %d without an error code", status)}
	switch {
	case status == http.StatusTooManyRequests:
		r.Outcome, r.Delay, r.Reason = SlowDown, ThroughputDelay, "http 429"
	case status >= 500:
		r.Outcome, r.Reason = Unknown, "http "+strconv.Itoa(status)
	default:
		r.Outcome, r.Delay, r.Reason = Retry, RetryDelay, "http "+strconv.Itoa(status)
	}
	return r
}

// classifyTransport separates failures that prove nothing was sent (no
// connection could be made) from those after the request may have left.
func classifyTransport(status int, err error) Result {
	r := Result{Code: -1, Err: err}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case errors.Is(err, errNotSent):
		r.Outcome, r.Delay, r.Reason = Retry, RetryDelay, "not sent"
	case errors.As(err, &dnsErr):
		r.Outcome, r.Delay, r.Reason = Retry, RetryDelay, "dns lookup failed"
	case errors.As(err, &opErr) && opErr.Op == "dial":
		r.Outcome, r.Delay, r.Reason = Retry, RetryDelay, "connect failed"
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		r.Outcome, r.Reason = Unknown, "timeout"
	case errors.Is(err, context.Canceled):
		r.Outcome, r.Reason = Unknown, "cancelled in flight"
	default:
		r.Outcome, r.Reason = Unknown, "connection failed"
		if status != 0 {
			r.Reason = "response cut off (http " + strconv.Itoa(status) + ")"
		}
	}
	return r
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// errNotSent marks failures that happened before any byte left.
var errNotSent = errors.New("request not sent")

// reason builds the client-safe explanation from Meta's text, which names
// the problem but never echoes credentials: valid UTF-8 without NUL bytes,
// at most 300 bytes.
func reason(code int, message, details string) string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(code))
	if message != "" {
		b.WriteString(": ")
		b.WriteString(message)
	}
	if details != "" {
		b.WriteString(" (")
		b.WriteString(details)
		b.WriteString(")")
	}
	const maxReason = 300
	// It is stored as the message's last_error: PostgreSQL text holds no
	// NUL byte, which JSON can carry as \u0000.
	s := strings.ReplaceAll(b.String(), "\x00", "")
	if len(s) > maxReason {
		s = strings.ToValidUTF8(s[:maxReason], "")
	}
	return s
}

// retryAfter reads a Retry-After header in either form: delay-seconds, or
// an HTTP-date measured against the response's own Date header when there
// is one (so the result does not depend on our clock).
func retryAfter(h http.Header) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	const maxRetryAfter = 24 * time.Hour
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(secs) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	now := time.Now()
	if d, err := http.ParseTime(h.Get("Date")); err == nil {
		now = d
	}
	d := at.Sub(now)
	if d < 0 {
		d = 0
	}
	return min(d, maxRetryAfter), true
}
