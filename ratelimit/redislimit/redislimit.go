// Package redislimit is the ratelimit.Limiter that several gateway nodes
// share: each account's token bucket lives in Redis and every operation on
// it is one server-side script, so no two nodes can both take the last
// token. The bucket is the same generic cell rate algorithm as
// ratelimit.Local (a theoretical arrival time), kept in microseconds so
// that Lua's doubles hold every instant exactly (2^53 µs is 285 years).
//
// Time is the Redis server's clock (the TIME command inside the script),
// one clock for every node whatever their own drift; a Limiter given a
// Clock passes its time instead, which is how the conformance suite drives
// it on virtual time.
package redislimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/ratelimit"
)

// Config configures a Limiter.
type Config struct {
	// Client is the Redis connection (a *redis.Client, a cluster client
	// or a ring: the scripts touch one key each).
	Client redis.Scripter
	// Prefix starts every key, e.g. "wamux:" (default), so that several
	// gateways, or tests, can share one server.
	Prefix string
	// Clock, when set, replaces the Redis server's clock.
	Clock wamux.Clock
	// DefaultRate and DefaultBurst apply to accounts never given a limit;
	// zero means ratelimit.DefaultRate and ratelimit.DefaultBurst.
	DefaultRate  float64
	DefaultBurst int
}

// Limiter keeps each account's bucket in a Redis hash at
// <prefix>bucket:<account id> with fields iv (the emission interval, µs),
// burst and tat (µs since the Unix epoch; 0 or absent: full).
type Limiter struct {
	rdb          redis.Scripter
	prefix       string
	clock        wamux.Clock
	defaultIV    int64
	defaultBurst int
}

var _ ratelimit.Limiter = (*Limiter)(nil)

// New builds a Limiter. It does not contact Redis: the scripts are loaded
// on first use (EVALSHA, then EVAL when the server does not have them).
func New(cfg Config) (*Limiter, error) {
	if cfg.Client == nil {
		return nil, errors.New("redislimit: no Redis client")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "wamux:"
	}
	if cfg.DefaultRate == 0 {
		cfg.DefaultRate = ratelimit.DefaultRate
	}
	if cfg.DefaultBurst == 0 {
		cfg.DefaultBurst = ratelimit.DefaultBurst
	}
	if err := checkLimit(cfg.DefaultRate, cfg.DefaultBurst); err != nil {
		return nil, fmt.Errorf("redislimit: default limit: %w", err)
	}
	return &Limiter{rdb: cfg.Client, prefix: cfg.Prefix, clock: cfg.Clock,
		defaultIV: intervalMicros(cfg.DefaultRate), defaultBurst: cfg.DefaultBurst}, nil
}

// intervalMicros is the emission interval of rate in whole microseconds,
// rounded up: slightly below the rate, never above it.
func intervalMicros(rate float64) int64 {
	return max(int64(math.Ceil(1e6/rate)), 1)
}

func checkLimit(rate float64, burst int) error {
	if math.IsNaN(rate) || rate < ratelimit.MinLimitRate || rate > ratelimit.MaxLimitRate {
		return fmt.Errorf("%w: rate %v not in [%v, %v]", ratelimit.ErrInvalidLimit, rate, ratelimit.MinLimitRate, ratelimit.MaxLimitRate)
	}
	if burst < 1 || burst > ratelimit.MaxBurst {
		return fmt.Errorf("%w: burst %d not in [1, %d]", ratelimit.ErrInvalidLimit, burst, ratelimit.MaxBurst)
	}
	return nil
}

func (l *Limiter) key(accountID string) string { return l.prefix + "bucket:" + accountID }

// now is the time argument of a script: the Clock's, or "" for the
// server's own.
func (l *Limiter) now() string {
	if l.clock == nil {
		return ""
	}
	return strconv.FormatInt(l.clock.Now().UnixMicro(), 10)
}

// prelude reads the bucket (KEYS[1]) and the time: ARGV[1] (µs) or TIME;
// ARGV[2] and ARGV[3] are the default interval and burst.
var prelude = `
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local v = redis.call('HMGET', KEYS[1], 'iv', 'burst', 'tat')
local iv = tonumber(v[1]) or tonumber(ARGV[2])
local burst = tonumber(v[2]) or tonumber(ARGV[3])
local tat = tonumber(v[3]) or 0
local maxdebt = ` + maxDebtMicros + `
`

var maxDebtMicros = strconv.FormatInt(ratelimit.MaxDebt.Microseconds(), 10)

// reserve: ARGV[4] = n. Returns {1, 0} granted, {0, wait µs} refused,
// {-1, burst} when n exceeds the burst.
var reserveScript = redis.NewScript(prelude + `
local n = tonumber(ARGV[4])
if n > burst then return {-1, burst} end
local base = math.max(tat, now)
local newtat = base + n * iv
local allow = newtat - burst * iv
if now < allow then return {0, allow - now} end
redis.call('HSET', KEYS[1], 'iv', iv, 'burst', burst, 'tat', newtat)
return {1, 0}
`)

// debit: ARGV[4] = n; the bucket may go below zero by at most MaxDebt.
var debitScript = redis.NewScript(prelude + `
local n = math.min(tonumber(ARGV[4]), burst + math.floor(maxdebt / iv) + 1)
local base = math.max(tat, now)
local newtat = math.min(base + n * iv, now + burst * iv + maxdebt)
if newtat > tat then tat = newtat end
redis.call('HSET', KEYS[1], 'iv', iv, 'burst', burst, 'tat', tat)
return 1
`)

// tokens: the level as a string (a Lua number in a reply is truncated).
var tokensScript = redis.NewScript(prelude + `
local debt = tat - now
if debt <= 0 then return tostring(burst) end
return tostring(math.max(burst - debt / iv, 0))
`)

// setlimit: ARGV[4], ARGV[5] = the new interval and burst. Keeps the
// tokens held (capped at the new burst) or owed (capped at MaxDebt of the
// new rate), rounding a debt up so the change never creates tokens, as
// ratelimit.Local does.
var setLimitScript = redis.NewScript(prelude + `
local niv, nburst = tonumber(ARGV[4]), tonumber(ARGV[5])
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'iv', niv, 'burst', nburst, 'tat', 0)
  return 1
end
if niv == iv and nburst == burst then return 1 end
local debt
if niv == iv then
  debt = math.max(tat - now, 0) + (nburst - burst) * iv
else
  local level = burst
  if tat - now > 0 then level = burst - (tat - now) / iv end
  local have = math.min(level, nburst)
  debt = math.ceil((nburst - have) * niv)
end
if debt <= 0 then
  tat = 0
else
  tat = now + debt
  if niv ~= iv then tat = math.min(tat, now + nburst * niv + maxdebt) end
end
redis.call('HSET', KEYS[1], 'iv', niv, 'burst', nburst, 'tat', tat)
return 1
`)

func (l *Limiter) run(ctx context.Context, s *redis.Script, accountID string, extra ...any) (any, error) {
	args := append([]any{l.now(), l.defaultIV, l.defaultBurst}, extra...)
	return s.Run(ctx, l.rdb, []string{l.key(accountID)}, args...).Result()
}

// Reserve implements ratelimit.Limiter.
func (l *Limiter) Reserve(ctx context.Context, accountID string, n int) (bool, time.Duration, error) {
	if n < 1 {
		return false, 0, fmt.Errorf("reserve %d tokens for %s: %w", n, accountID, ratelimit.ErrInvalidCount)
	}
	res, err := l.run(ctx, reserveScript, accountID, n)
	if err != nil {
		return false, 0, fmt.Errorf("reserve %d tokens for %s: redis: %w", n, accountID, err)
	}
	v, ok := res.([]any)
	if !ok || len(v) != 2 {
		return false, 0, fmt.Errorf("reserve %d tokens for %s: unexpected reply %v", n, accountID, res)
	}
	code, _ := v[0].(int64)
	arg, _ := v[1].(int64)
	switch code {
	case 1:
		return true, 0, nil
	case 0:
		return false, time.Duration(arg) * time.Microsecond, nil
	default:
		return false, 0, fmt.Errorf("reserve %d tokens for %s (burst %d): %w", n, accountID, arg, ratelimit.ErrExceedsBurst)
	}
}

// SetLimit implements ratelimit.Limiter.
func (l *Limiter) SetLimit(ctx context.Context, accountID string, rate float64, burst int) error {
	if err := checkLimit(rate, burst); err != nil {
		return fmt.Errorf("set limit of %s: %w", accountID, err)
	}
	if _, err := l.run(ctx, setLimitScript, accountID, intervalMicros(rate), burst); err != nil {
		return fmt.Errorf("set limit of %s: redis: %w", accountID, err)
	}
	return nil
}

// Tokens implements ratelimit.Limiter.
func (l *Limiter) Tokens(ctx context.Context, accountID string) (float64, error) {
	res, err := l.run(ctx, tokensScript, accountID)
	if err != nil {
		return 0, fmt.Errorf("tokens of %s: redis: %w", accountID, err)
	}
	s, _ := res.(string)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("tokens of %s: unexpected reply %v", accountID, res)
	}
	return f, nil
}

// Debit implements ratelimit.Limiter.
func (l *Limiter) Debit(ctx context.Context, accountID string, n int) error {
	if n < 1 {
		return fmt.Errorf("debit %d tokens of %s: %w", n, accountID, ratelimit.ErrInvalidCount)
	}
	if _, err := l.run(ctx, debitScript, accountID, n); err != nil {
		return fmt.Errorf("debit %d tokens of %s: redis: %w", n, accountID, err)
	}
	return nil
}

// Forget deletes an account's bucket (a deleted account): its next use
// starts with a full bucket at the default limit.
func (l *Limiter) Forget(ctx context.Context, accountID string) error {
	// Del is not on redis.Scripter; the bucket is removed by a script.
	if _, err := forgetScript.Run(ctx, l.rdb, []string{l.key(accountID)}).Result(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("forget %s: redis: %w", accountID, err)
	}
	return nil
}

var forgetScript = redis.NewScript(`redis.call('DEL', KEYS[1]) return 1`)
