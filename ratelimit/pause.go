package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/wamux/wamux"
)

// AppPause holds the pauses of whole Meta apps: after the Graph API's
// application call limit (code 4) no account of the app may send until the
// time the provider gave. A later pause extends one in force; an earlier
// one never shortens it. LocalAppPause keeps the pauses in process;
// redislimit.AppPause shares them between nodes. Both pass
// ratelimittest.RunAppPause.
type AppPause interface {
	// Pause pauses app until until, unless a pause ending later is in
	// force, and returns the end of the pause in force (zero when until
	// is not in the future and none is).
	Pause(ctx context.Context, app string, until time.Time) (time.Time, error)
	// PausedUntil returns the end of the app's pause in force now, or
	// zero when it is not paused.
	PausedUntil(ctx context.Context, app string) (time.Time, error)
}

// AppKey names the Meta app whose access token and API host an account
// sends with: an access token belongs to one app. It is a hash, so the
// token appears in no key, log or metric label.
func AppKey(accessToken, apiHost string) string {
	h := sha256.New()
	h.Write([]byte(apiHost))
	h.Write([]byte{0})
	h.Write([]byte(accessToken))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// LocalAppPause is the in-process AppPause.
type LocalAppPause struct {
	clock wamux.Clock

	mu     sync.Mutex
	until  map[string]time.Time
	sweepN int
}

var _ AppPause = (*LocalAppPause)(nil)

// NewLocalAppPause builds an in-process AppPause; a nil clock is the
// system clock.
func NewLocalAppPause(clock wamux.Clock) *LocalAppPause {
	if clock == nil {
		clock = wamux.SystemClock{}
	}
	return &LocalAppPause{clock: clock, until: make(map[string]time.Time), sweepN: 64}
}

// Pause implements AppPause.
func (p *LocalAppPause) Pause(_ context.Context, app string, until time.Time) (time.Time, error) {
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := p.until[app]
	if !cur.After(now) {
		cur = time.Time{}
	}
	if !until.After(now) || !until.After(cur) {
		return cur, nil
	}
	p.until[app] = until
	if len(p.until) >= p.sweepN {
		for k, u := range p.until {
			if !u.After(now) {
				delete(p.until, k)
			}
		}
		p.sweepN = max(64, 2*len(p.until))
	}
	return until, nil
}

// PausedUntil implements AppPause.
func (p *LocalAppPause) PausedUntil(_ context.Context, app string) (time.Time, error) {
	now := p.clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if u := p.until[app]; u.After(now) {
		return u, nil
	}
	return time.Time{}, nil
}

// Len reports how many pauses are kept, running or not yet swept.
func (p *LocalAppPause) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.until)
}
