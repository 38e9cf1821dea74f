package redislimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/ratelimit"
)

// AppPauseConfig configures AppPause.
type AppPauseConfig struct {
	// Client is the Redis connection.
	Client redis.Scripter
	// Prefix starts every key; "wamux:" by default.
	Prefix string
	// Clock, when set, replaces the Redis server's clock.
	Clock wamux.Clock
}

// AppPause is the ratelimit.AppPause that nodes share: an app's pause is
// the string <prefix>apppause:<app key> holding its end (µs since the Unix
// epoch), which expires at that end.
type AppPause struct {
	rdb    redis.Scripter
	prefix string
	clock  wamux.Clock
}

var _ ratelimit.AppPause = (*AppPause)(nil)

// NewAppPause builds a shared AppPause. It does not contact Redis.
func NewAppPause(cfg AppPauseConfig) (*AppPause, error) {
	if cfg.Client == nil {
		return nil, errors.New("redislimit: no Redis client")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "wamux:"
	}
	return &AppPause{rdb: cfg.Client, prefix: cfg.Prefix, clock: cfg.Clock}, nil
}

// pauseScript: KEYS[1] the app's pause; ARGV[1] the time (µs, or "" for
// the server's); ARGV[2] the new end (µs), or "" to read only. Returns
// the end of the pause in force, 0 for none. The key's expiry is relative
// to the script's time, so an injected clock gets the same lifetime.
var pauseScript = redis.NewScript(`
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local cur = tonumber(redis.call('GET', KEYS[1]))
if not cur or cur <= now then cur = 0 end
local untl = tonumber(ARGV[2])
if not untl or untl <= now or untl <= cur then return cur end
redis.call('SET', KEYS[1], untl, 'PX', math.ceil((untl - now) / 1000))
return untl
`)

func (p *AppPause) run(ctx context.Context, app string, until string) (time.Time, error) {
	now := ""
	if p.clock != nil {
		now = fmt.Sprint(p.clock.Now().UnixMicro())
	}
	v, err := pauseScript.Run(ctx, p.rdb, []string{p.prefix + "apppause:" + app}, now, until).Int64()
	if err != nil {
		return time.Time{}, fmt.Errorf("app pause: redis: %w", err)
	}
	if v == 0 {
		return time.Time{}, nil
	}
	return time.UnixMicro(v), nil
}

// Pause implements ratelimit.AppPause.
func (p *AppPause) Pause(ctx context.Context, app string, until time.Time) (time.Time, error) {
	return p.run(ctx, app, fmt.Sprint(until.UnixMicro()))
}

// PausedUntil implements ratelimit.AppPause.
func (p *AppPause) PausedUntil(ctx context.Context, app string) (time.Time, error) {
	return p.run(ctx, app, "")
}
