//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/wamux/wamux/store"
)

// lockFile takes an exclusive flock on path, creating it if needed.
func lockFile(path string) (func() error, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("sqlite: lock file %s is held by another process: %w", path, store.ErrInUse)
		}
		return nil, fmt.Errorf("sqlite: lock %s: %w", path, err)
	}
	return f.Close, nil
}
