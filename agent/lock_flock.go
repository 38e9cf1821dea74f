//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive flock on dir/lock so that a second agent
// cannot interleave its writes and acks with ours. The kernel drops the lock
// when the process dies, so a kill -9 leaves nothing to clean up.
func lockDir(dir string) (func() error, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("agent: lock spool dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("agent: spool dir %s is in use by another agent: %w", dir, err)
		}
		return nil, fmt.Errorf("agent: lock spool dir: %w", err)
	}
	return f.Close, nil
}
