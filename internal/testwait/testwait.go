// Package testwait waits, in tests, for a condition that another goroutine
// or process brings about when nothing signals it: it polls, and fails the
// test with a message once a deadline passes.
package testwait

import (
	"testing"
	"time"
)

// The pause between polls starts at firstPause and doubles up to maxPause:
// a condition that is nearly there is seen at once, and a long wait does not
// keep a CPU busy polling.
const (
	firstPause = time.Millisecond
	maxPause   = 50 * time.Millisecond
)

// For polls cond until it returns true. If within passes first, it fails t
// with "timed out after <within> waiting for <what>".
func For(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for pause := firstPause; !cond(); pause = min(2*pause, maxPause) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(pause)
	}
}

// ForNil polls check until it returns nil. If within passes first, it fails
// t with the last error check returned, which says what was still wrong.
func ForNil(t testing.TB, within time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for pause := firstPause; ; pause = min(2*pause, maxPause) {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s: %v", within, err)
		}
		time.Sleep(pause)
	}
}
