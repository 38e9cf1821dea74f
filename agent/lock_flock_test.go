//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package agent

import (
	"strings"
	"testing"
)

// Two agents of different accounts cannot share a SpoolDir at the same
// time: the lock keeps the second out before it reads or rewrites the
// account file.
func TestConcurrentAgentsOfOtherAccountsShareNoSpool(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	dir := t.TempDir()
	a := newTestAgent(t, g, dir, nil)
	err := newAgentErr(t, g, dir, otherAccount)
	if err == nil || !strings.Contains(err.Error(), "in use by another agent") {
		t.Fatalf("second New on a SpoolDir in use = %v, want the in-use error", err)
	}
	if got := readAccountFile(t, dir); got != testAccount {
		t.Errorf("account file = %q while the first agent runs, want %q", got, testAccount)
	}
	rs := testReceipts("shared", 4)
	reportAll(t, a, rs)
	closeAgent(t, a)
	wantStoredAs(t, g, map[string][]Receipt{testAccount: rs})
}
