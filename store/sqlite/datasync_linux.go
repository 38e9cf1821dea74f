package sqlite

import (
	"os"
	"syscall"
)

// syncData makes f's data durable with fdatasync(2), as SQLite's own unix
// VFS does where it is built with it (the modernc build is not: its
// commits call fsync): it flushes what is needed to read the data
// back (a grown file's size included) but not timestamps, which saves
// the journal commit an fsync pays for an mtime change when SQLite
// rewrites a WAL from its start.
func syncData(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
