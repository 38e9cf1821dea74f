package sqlite

import (
	"context"
	"errors"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/wamux/wamux"
)

// errClosed answers calls made after Close; a closed store is unavailable,
// not broken.
var errClosed = wamux.Errorf(wamux.EUnavailable, "store closed")

// unavailableError marks an infrastructure failure a client may retry (a
// deadline, a lock held too long). It unwraps both to a domain error with
// code EUnavailable — so wamux.ErrorCode reports "unavailable" and the
// client sees a safe message — and to the cause, so errors.Is(err,
// context.DeadlineExceeded) keeps working.
type unavailableError struct{ cause error }

func (e *unavailableError) Error() string { return "store unavailable: " + e.cause.Error() }

func (e *unavailableError) Unwrap() []error {
	return []error{wamux.Errorf(wamux.EUnavailable, "store unavailable, retry later"), e.cause}
}

// wrapErr marks err as unavailable when retrying later can help; other
// errors are returned as they are.
func wrapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &unavailableError{cause: err}
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return &unavailableError{cause: err}
		}
	}
	return err
}

// isUnique reports a violated UNIQUE or PRIMARY KEY constraint.
func isUnique(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	c := se.Code()
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
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

// IsUnavailable reports whether err means the store could not do the work
// now but may later (closed, locked too long, deadline passed); the same as
// wamux.ErrorCode(err) == wamux.EUnavailable for errors from this package.
func IsUnavailable(err error) bool {
	return wamux.ErrorCode(err) == wamux.EUnavailable
}
