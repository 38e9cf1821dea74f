//go:build !linux

package sqlite

import "os"

// syncData is fsync where fdatasync is not to be had.
func syncData(f *os.File) error { return f.Sync() }
