//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sqlite

// lockFile is a no-op where flock is unavailable (Windows, Plan 9, wasm):
// there nothing stops a second gateway on the same data dir, and running
// one is the operator's mistake to avoid.
func lockFile(string) (func() error, error) {
	return func() error { return nil }, nil
}
