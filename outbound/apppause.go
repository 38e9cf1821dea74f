package outbound

import (
	"context"
	"sync"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/ratelimit"
)

// appPauseRecheck is how long a read of the shared app pause stands before
// a worker asks the AppPause again: one round trip per app and second at
// most, however many accounts of the app this node sends for. A pause set
// by another node reaches this one within it.
const appPauseRecheck = time.Second

// appPauses reads the shared pauses of whole Meta apps (Config.AppPause)
// for the workers, remembering each answer for appPauseRecheck.
type appPauses struct {
	shared ratelimit.AppPause // nil: no pause is shared beyond this node

	mu   sync.Mutex
	seen map[string]appPauseRead // by ratelimit.AppKey
}

type appPauseRead struct {
	until, at time.Time
}

// pause records, for every node, that the app is paused until until.
func (p *appPauses) pause(ctx context.Context, app string, until time.Time) error {
	if p.shared == nil {
		return nil
	}
	got, err := p.shared.Pause(ctx, app, until)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.seen[app] = appPauseRead{until: got, at: time.Now()}
	p.mu.Unlock()
	return nil
}

// until returns the end of the app's pause in force, or zero.
func (p *appPauses) until(ctx context.Context, app string) (time.Time, error) {
	if p.shared == nil {
		return time.Time{}, nil
	}
	p.mu.Lock()
	r, ok := p.seen[app]
	p.mu.Unlock()
	// The recheck is timed on the wall clock: a test's stopped clock must
	// not freeze the answer.
	if ok && time.Since(r.at) < appPauseRecheck {
		return r.until, nil
	}
	u, err := p.shared.PausedUntil(ctx, app)
	if err != nil {
		return time.Time{}, err
	}
	p.mu.Lock()
	p.seen[app] = appPauseRead{until: u, at: time.Now()}
	p.mu.Unlock()
	return u, nil
}

// accountApp is the ratelimit.AppKey of the app an account sends for.
func accountApp(a wamux.Account) string {
	return ratelimit.AppKey(a.AccessToken, apiHost(a))
}

// appPaused cools the worker's account down when another account of its
// app, on this node or another, hit the app's call limit: it returns the
// end of the pause, or zero when the app is not paused.
func (w *worker) appPaused(acct wamux.Account, now time.Time) time.Time {
	d := w.d
	if d.appPause.shared == nil {
		return time.Time{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	until, err := d.appPause.until(ctx, accountApp(acct))
	if err != nil {
		// The shared pause is advice on top of this account's own
		// limits: sending on risks at most a code 4 of its own.
		d.log.Warn("read the app pause", "account_id", w.id, "err", err)
		return time.Time{}
	}
	if !until.After(now) {
		return time.Time{}
	}
	if lim := d.limiter.Limit(w.id); lim.State == wamux.AccountCooldown && !lim.CooldownUntil.Before(until) {
		return until
	}
	started := d.limiter.CoolDown(w.id, until)
	w.coolDown(d.limiter.Limit(w.id).CooldownUntil, started, "another account of the same app reached the app's call limit")
	return until
}
