package sqlite

import (
	"context"
	"sync"

	"github.com/wamux/wamux/store"
)

// LockSuffix names the gateway's lock file next to the database: path +
// LockSuffix. It is a file of its own: SQLite takes POSIX locks on the
// database file, and a lock of ours on it would mix with them.
const LockSuffix = ".lock"

var _ store.Owner = (*Store)(nil)

// Claim takes an exclusive, non-blocking lock on the lock file next to
// the database (LockSuffix) and holds it until Release. The kernel drops
// it when the process dies, so a crash leaves nothing to clean up, and
// the file itself stays. On systems without flock it is a no-op (see
// lock_other.go): running two gateways on one data dir there is the
// operator's mistake to avoid.
func (s *Store) Claim(ctx context.Context) (store.Claim, error) {
	if s.isClosed() {
		return nil, errClosed
	}
	unlock, err := lockFile(s.path + LockSuffix)
	if err != nil {
		return nil, err
	}
	return &fileClaim{unlock: unlock, lost: make(chan struct{})}, nil
}

// fileClaim is held as long as its file stays open: it cannot break.
type fileClaim struct {
	once   sync.Once
	unlock func() error
	err    error
	lost   chan struct{} // never closed
}

func (c *fileClaim) Lost() <-chan struct{} { return c.lost }
func (c *fileClaim) Err() error            { return nil }

func (c *fileClaim) Release() error {
	c.once.Do(func() { c.err = c.unlock() })
	return c.err
}
