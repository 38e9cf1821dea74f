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

// DeparturesConfig configures Departures.
type DeparturesConfig struct {
	// Client is the Redis connection.
	Client redis.Scripter
	// Prefix starts every key; "wamux:" by default.
	Prefix string
	// Clock, when set, replaces the Redis server's clock.
	Clock wamux.Clock
}

// Departures is the ratelimit.Departures that nodes share: an account's
// schedule is the string <prefix>depart:<account id> holding the
// theoretical arrival time of its next departure (µs since the Unix
// epoch, on the Redis server's clock), which expires once it is past. A
// booking is the Pacer's: the request leaves at the later of now and
// that time less burst−1 intervals, and the time moves one interval on.
// A change of limit applies to the bookings after it.
type Departures struct {
	rdb    redis.Scripter
	prefix string
	clock  wamux.Clock
}

var _ ratelimit.Departures = (*Departures)(nil)

// NewDepartures builds a shared Departures. It does not contact Redis.
func NewDepartures(cfg DeparturesConfig) (*Departures, error) {
	if cfg.Client == nil {
		return nil, errors.New("redislimit: no Redis client")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "wamux:"
	}
	return &Departures{rdb: cfg.Client, prefix: cfg.Prefix, clock: cfg.Clock}, nil
}

// departScript: KEYS[1] the schedule; ARGV[1] now (µs, or "" for TIME),
// ARGV[2] the interval (µs), ARGV[3] the burst. Returns the wait in µs.
var departScript = redis.NewScript(`
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local iv, burst = tonumber(ARGV[2]), tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1])) or 0
local at = math.max(tat - (burst - 1) * iv, now)
local newtat = math.max(tat, at) + iv
redis.call('SET', KEYS[1], string.format('%d', newtat), 'PX', math.floor((newtat - now) / 1000) + 1000)
return at - now
`)

// Reserve implements ratelimit.Departures.
func (d *Departures) Reserve(ctx context.Context, accountID string, rate float64, burst int) (time.Duration, error) {
	rate = min(max(rate, ratelimit.MinLimitRate), ratelimit.MaxLimitRate)
	burst = min(max(burst, 1), ratelimit.MaxBurst)
	now := ""
	if d.clock != nil {
		now = fmt.Sprint(d.clock.Now().UnixMicro())
	}
	wait, err := departScript.Run(ctx, d.rdb, []string{d.prefix + "depart:" + accountID}, now, intervalMicros(rate), burst).Int64()
	if err != nil {
		return 0, fmt.Errorf("departure of %s: redis: %w", accountID, err)
	}
	return time.Duration(max(wait, 0)) * time.Microsecond, nil
}
