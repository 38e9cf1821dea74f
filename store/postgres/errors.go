package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/wamux/wamux"
)

// errClosed answers calls made after Close.
var errClosed = wamux.Errorf(wamux.EUnavailable, "store closed")

// unavailableError marks a failure a client may retry later: the server
// does not answer, the connection broke, or the deadline passed. It unwraps
// both to a domain error with code EUnavailable (wamux.ErrorCode reports
// "unavailable", HTTP 503) and to the cause, so errors.Is(err,
// context.DeadlineExceeded) and errors.As(err, *pgconn.PgError) keep
// working.
type unavailableError struct{ cause error }

func (e *unavailableError) Error() string { return "store unavailable: " + e.cause.Error() }

func (e *unavailableError) Unwrap() []error {
	return []error{wamux.Errorf(wamux.EUnavailable, "store unavailable, retry later"), e.cause}
}

// IsUnavailable reports whether err means the database could not be
// reached or did not answer in time; the same as
// wamux.ErrorCode(err) == wamux.EUnavailable for errors from this package.
func IsUnavailable(err error) bool {
	return wamux.ErrorCode(err) == wamux.EUnavailable
}

// wrapErr marks failures that retrying later can cure as unavailable (the
// connection, the server's resources or its own time limits), data
// exceptions as invalid, and returns other errors unchanged.
func wrapErr(err error) error {
	if err == nil || isDomain(err) {
		return err
	}
	if isTransient(err) {
		return &unavailableError{cause: err}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22") {
		// A data exception (a NUL byte or invalid UTF-8 in text, a value
		// out of range): the input is at fault, and retrying cannot help.
		return &invalidError{cause: err}
	}
	return err
}

// invalidError marks a failure caused by the data written; it unwraps to
// a domain error with code EInvalid and to the cause.
type invalidError struct{ cause error }

func (e *invalidError) Error() string { return "invalid data: " + e.cause.Error() }

func (e *invalidError) Unwrap() []error {
	return []error{wamux.Errorf(wamux.EInvalid, "the store refused the data as invalid"), e.cause}
}

func isDomain(err error) bool {
	var e *wamux.Error
	return errors.As(err, &e)
}

// isTransient reports a failure retrying later can cure: the connection
// broke or could not be made, the deadline passed, or the server gave up
// under its own limits (resources, statement_timeout, lock_timeout, a
// conflict that outlived inTx's attempts); the request was not at fault.
func isTransient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"): // connection exception
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // shutdown, cannot connect now
			return true
		case strings.HasPrefix(pgErr.Code, "53"): // insufficient resources: too many connections, disk full, out of memory
			return true
		case pgErr.Code == "57014", pgErr.Code == "55P03": // statement_timeout or a cancel, lock_timeout
			return true
		case isRetryable(err): // still conflicting after inTx's attempts
			return true
		}
		return false
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) || pgconn.Timeout(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// isUnique reports a unique_violation.
func isUnique(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// isRetryable reports a transaction the server aborted to resolve a
// deadlock or a serialization conflict; running it again is safe.
func isRetryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// ms stores a time as unix milliseconds; the zero time is 0.
func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// fromMS is the inverse of ms and always returns UTC.
func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// storable reports whether PostgreSQL text can hold v (no NUL byte, valid
// UTF-8). A lookup by a key that is not storable finds nothing, as in
// store/sqlite, instead of failing with a data exception.
func storable(v string) bool { return strings.IndexByte(v, 0) < 0 && utf8.ValidString(v) }

// storableOnly returns the storable values of vs.
func storableOnly(vs []string) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		if storable(v) {
			out = append(out, v)
		}
	}
	return out
}
