package cloudapi_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine they started is
// still running at the end: every component's Stop or Close must wait for
// what it started, and every test must stop what it starts.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
