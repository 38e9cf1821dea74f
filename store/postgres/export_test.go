package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/wamux/wamux/store"
)

// SetClaimSession makes claim c take the session (pid, start) for the one
// that last held its lock, as if c's own session had exited and the server
// had given its pid to pid's session: the server cannot be made to reuse a
// pid on demand.
func SetClaimSession(c store.Claim, pid uint32, start time.Time) {
	pc := c.(*pgClaim)
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.holding = session{pid: pid, start: start}
}

// TerminateClaimSession ends session (pid, start) the way a claim ends its
// own broken lock session, and says whether it did.
func TerminateClaimSession(ctx context.Context, s *Store, pid uint32, start time.Time) (bool, error) {
	c := &pgClaim{cfg: s.pool.Config().ConnConfig.Copy()}
	return c.terminate(ctx, session{pid: pid, start: start})
}

// HoldClaimRetake holds claim c before each attempt to take its lock again
// after a break, until release is called: reached receives when an attempt
// waits. Release of c ends a wait too.
func HoldClaimRetake(c store.Claim) (reached <-chan struct{}, release func()) {
	pc := c.(*pgClaim)
	waiting := make(chan struct{}, 1)
	released := make(chan struct{})
	var once sync.Once
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.beforeRetake = func(ctx context.Context) {
		select {
		case <-released:
			return
		default:
		}
		select {
		case waiting <- struct{}{}:
		default:
		}
		select {
		case <-released:
		case <-ctx.Done():
		}
	}
	return waiting, func() { once.Do(func() { close(released) }) }
}

// ForgetClaimBump makes claim c, at its next attempt to take its lock
// again, remember the epoch before its last bump, as if that bump's answer
// had been lost with the connection. It runs on c's own goroutine, the
// only one that touches the epoch.
func ForgetClaimBump(c store.Claim) {
	pc := c.(*pgClaim)
	var once sync.Once
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.beforeRetake = func(context.Context) { once.Do(func() { pc.epoch-- }) }
}
