package wamux

import (
	"errors"
	"fmt"
	"time"
)

// Domain error codes. They are what a client sees in
// {"error":{"code":…,"message":…}}; anything else reaches it as EInternal.
const (
	EInvalid      = "invalid"      // bad input: malformed, unknown field, failed validation
	EUnauthorized = "unauthorized" // missing or wrong credentials
	EForbidden    = "forbidden"    // credentials fine, action not allowed
	ENotFound     = "not_found"    // the named thing does not exist
	EConflict     = "conflict"     // clashes with what is stored (same id, other content)
	ETooLarge     = "too_large"    // body over the endpoint's limit
	EUnavailable  = "unavailable"  // a dependency (store, stream) does not answer; retry later
	EInternal     = "internal"     // a bug or an unexpected failure
	ENotAllowed   = "not_allowed"  // wrong HTTP method
	EUnsupported  = "unsupported"  // wrong content type
	ERateLimited  = "rate_limited" // the client itself is sending too much
	// EQueueFull: the account's queue (count or backlog at its rate) or
	// the gateway's memory budget for queued messages is full; retry
	// after the error's RetryAfter.
	EQueueFull    = "queue_full"
	ENotImplement = "not_implemented"
	// EOutsideWindow: a message other than a template to a customer whose
	// last message to the account is older than the 24 h customer
	// service window; only a template may reopen the conversation.
	EOutsideWindow = "outside_service_window"
	// EProvider: the provider (Meta) refused or failed a call made for
	// the request.
	EProvider = "provider_error"
)

// Error is a domain error: a code from the table above and a message that is
// safe to show to the client (no SQL, no secrets, no stack).
type Error struct {
	Code    string
	Message string
	// RetryAfter, when positive, is how long a client should wait before
	// trying again (ERateLimited, EQueueFull).
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf builds a domain error with a formatted, client-safe message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the domain code of err, or EInternal when err is not (and
// does not wrap) a domain error. nil has no code.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// ErrorMessage returns the client-safe message of err; infrastructure errors
// become a generic text so their details stay in the server's log.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// RetryAfter returns the wait a domain error asks of the client (0: none).
func RetryAfter(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}
