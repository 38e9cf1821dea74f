package redislimit

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/seal"
	"github.com/wamux/wamux/ratelimit"
)

// PairsConfig configures Pairs.
type PairsConfig struct {
	// Client is the Redis connection.
	Client redis.Scripter
	// Prefix starts every key; "wamux:" by default.
	Prefix string
	// Clock, when set, replaces the Redis server's clock.
	Clock wamux.Clock
	// Interval and Burst are the pair policy; zero means
	// ratelimit.DefaultPairInterval and ratelimit.DefaultPairBurst. Every
	// node must be given the same (the settings pair_interval and
	// pair_burst, which reach every node).
	Interval time.Duration
	Burst    int
	// RecipientKey keys the HMAC that names a recipient in Redis, so that
	// no phone number is stored there and a leaked key space cannot be
	// reversed by hashing every number. Every node must be given the same
	// key: RecipientKey derives it from the secret key. Required.
	RecipientKey []byte
}

// Pairs is the ratelimit.Pairs that several nodes share: each pair's
// state is a Redis hash at <prefix>pair:<account>:<HMAC of the
// recipient> with fields start, repaid (µs since the Unix epoch), n (the
// burst's messages) and closed (1 after a 131056), changed by one script
// per call. A pair that owes nothing behaves as one never seen, so the
// hash expires when its debt is repaid.
type Pairs struct {
	rdb    redis.Scripter
	prefix string
	clock  wamux.Clock
	mac    []byte

	mu       sync.Mutex
	interval time.Duration
	burst    int
}

var _ ratelimit.Pairs = (*Pairs)(nil)

// RecipientKeyInfo is the HKDF purpose of the recipient key.
const RecipientKeyInfo = "wamux pair recipient"

// RecipientKey derives PairsConfig.RecipientKey from the keyring of the
// secret key (WAMUX_SECRET_KEY): nodes configured with the same first key
// name a recipient alike. A key rotation renames every pair, so for at
// most one burst's debt (Burst×Interval) a pair's messages before the
// rotation are not counted against it.
func RecipientKey(keys *seal.Keyring) ([]byte, error) {
	k, err := keys.Derive(RecipientKeyInfo, sha256.Size)
	if err != nil {
		return nil, fmt.Errorf("redislimit: recipient key: %w", err)
	}
	return k, nil
}

// NewPairs builds a shared pair limiter. It does not contact Redis.
func NewPairs(cfg PairsConfig) (*Pairs, error) {
	if cfg.Client == nil {
		return nil, errors.New("redislimit: no Redis client")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "wamux:"
	}
	if cfg.Interval == 0 {
		cfg.Interval = ratelimit.DefaultPairInterval
	}
	if cfg.Burst == 0 {
		cfg.Burst = ratelimit.DefaultPairBurst
	}
	if err := ratelimit.CheckPairPolicy(cfg.Interval, cfg.Burst); err != nil {
		return nil, fmt.Errorf("redislimit: %w", err)
	}
	if len(cfg.RecipientKey) == 0 {
		return nil, errors.New("redislimit: no recipient key (see RecipientKey)")
	}
	return &Pairs{rdb: cfg.Client, prefix: cfg.Prefix, clock: cfg.Clock, mac: bytes.Clone(cfg.RecipientKey),
		interval: cfg.Interval, burst: cfg.Burst}, nil
}

// key names the pair: the account in clear (an id of ours), the recipient
// by 128 bits of its HMAC.
func (p *Pairs) key(accountID, recipient string) string {
	h := hmac.New(sha256.New, p.mac)
	h.Write([]byte(recipient))
	return p.prefix + "pair:" + accountID + ":" + hex.EncodeToString(h.Sum(nil)[:16])
}

// pairScript applies one operation to a pair. KEYS[1] the pair; ARGV[1]
// the time (µs, or "" for the server's), ARGV[2] the interval (µs),
// ARGV[3] the burst, ARGV[4] the operation: wait, take, reserve or
// limited. Returns the wait in µs (0: may send; for reserve, 0 also means
// the message was taken).
var pairScript = redis.NewScript(`
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local iv, burst, op = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local v = redis.call('HMGET', KEYS[1], 'start', 'repaid', 'n', 'closed')
local start, repaid, n, closed = tonumber(v[1]), tonumber(v[2]), tonumber(v[3]) or 0, v[4] == '1'
local owes = repaid ~= nil and repaid > now
local wait = 0
if owes and (closed or now - start >= iv or n >= burst) then wait = repaid - now end
if op == 'wait' or (op == 'reserve' and wait > 0) then return wait end
if not owes then start, repaid, n, closed = now, now, 0, false end
if op == 'limited' then
  closed = true
  if repaid < now + iv then repaid = now + iv end
else
  repaid = repaid + iv
  n = n + 1
end
local c = 0
if closed then c = 1 end
redis.call('HSET', KEYS[1], 'start', start, 'repaid', repaid, 'n', n, 'closed', c)
redis.call('PEXPIRE', KEYS[1], math.ceil((repaid - now) / 1000))
return 0
`)

func (p *Pairs) run(ctx context.Context, op, accountID, recipient string) (time.Duration, error) {
	iv, burst := p.Policy()
	now := ""
	if p.clock != nil {
		now = fmt.Sprint(p.clock.Now().UnixMicro())
	}
	res, err := pairScript.Run(ctx, p.rdb, []string{p.key(accountID, recipient)},
		now, iv.Microseconds(), burst, op).Int64()
	if err != nil {
		return 0, fmt.Errorf("pair %s of %s: redis: %w", op, accountID, err)
	}
	return time.Duration(res) * time.Microsecond, nil
}

// Wait implements ratelimit.Pairs.
func (p *Pairs) Wait(ctx context.Context, accountID, recipient string) (time.Duration, error) {
	return p.run(ctx, "wait", accountID, recipient)
}

// Take implements ratelimit.Pairs.
func (p *Pairs) Take(ctx context.Context, accountID, recipient string) error {
	_, err := p.run(ctx, "take", accountID, recipient)
	return err
}

// Reserve implements ratelimit.Pairs.
func (p *Pairs) Reserve(ctx context.Context, accountID, recipient string) (bool, time.Duration, error) {
	w, err := p.run(ctx, "reserve", accountID, recipient)
	if err != nil {
		return false, 0, err
	}
	return w == 0, w, nil
}

// OnPairLimited implements ratelimit.Pairs.
func (p *Pairs) OnPairLimited(ctx context.Context, accountID, recipient string) error {
	_, err := p.run(ctx, "limited", accountID, recipient)
	return err
}

// SetPolicy implements ratelimit.Pairs. The policy is this node's; every
// node applies the same settings.
func (p *Pairs) SetPolicy(interval time.Duration, burst int) error {
	if err := ratelimit.CheckPairPolicy(interval, burst); err != nil {
		return fmt.Errorf("set pair policy: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.interval, p.burst = interval, burst
	return nil
}

// Policy implements ratelimit.Pairs.
func (p *Pairs) Policy() (time.Duration, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.interval, p.burst
}
