package postgres

import (
	"context"
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
