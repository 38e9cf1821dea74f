//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package agent

// lockDir is a no-op where flock is unavailable: running two agents on one
// spool dir there is the operator's mistake to avoid.
func lockDir(string) (func() error, error) {
	return func() error { return nil }, nil
}
