// Package redisbloom keeps L2 of the receipt dedup chain in Redis, so
// that every node asks one filter: a receipts.Filter with one Bloom filter
// per event hour, sized as the in-process one (receipts.BloomConfig). The
// filters are bitmaps (SETBIT and GETBIT inside one script per call, bit
// positions computed here), or the RedisBloom module's BF.* filters when
// the server has them. Each hour's key expires BloomHours after its hour
// ends, when no window can ask about it any more.
package redisbloom

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/redis/go-redis/v9"

	"github.com/wamux/wamux/receipts"
)

// Mode says how the hourly filters are kept.
type Mode string

// Modes of Config.Mode.
const (
	// ModeAuto uses the module when the server has BF.MEXISTS, bitmaps
	// otherwise.
	ModeAuto Mode = ""
	// ModeBitmap keeps each hour as a bitmap of m bits.
	ModeBitmap Mode = "bitmap"
	// ModeModule keeps each hour as a RedisBloom filter (BF.INSERT,
	// BF.MEXISTS) of the same capacity and error rate.
	ModeModule Mode = "module"
)

// chunk bounds the items one script call handles, so that no call holds
// the server for long.
const chunk = 1000

// Config configures a Filter.
type Config struct {
	// Client is the Redis connection.
	Client redis.UniversalClient
	// Prefix starts every key; "wamux:" by default.
	Prefix string
	// Bloom sizes the filters (ExpectedPerHour, FalsePositiveRate).
	Bloom receipts.BloomConfig
	// Mode chooses bitmaps or the module; every node must end up with
	// the same (ModeAuto does, on one server).
	Mode Mode
}

// Filter is a receipts.Filter in Redis.
type Filter struct {
	rdb    redis.UniversalClient
	prefix string
	mode   Mode
	m, k   uint
	rate   float64 // each hour's error rate (module mode)
	cap    uint
}

var _ receipts.Filter = (*Filter)(nil)

// New builds a Filter. With ModeAuto it asks the server whether it has
// the module, and fails when the server does not answer.
func New(ctx context.Context, cfg Config) (*Filter, error) {
	if cfg.Client == nil {
		return nil, errors.New("redisbloom: no Redis client")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "wamux:"
	}
	m, k, err := cfg.Bloom.Parameters()
	if err != nil {
		return nil, fmt.Errorf("redisbloom: %w", err)
	}
	if cfg.Bloom.ExpectedPerHour == 0 {
		cfg.Bloom.ExpectedPerHour = receipts.BloomExpectedPerHourDefault
	}
	if cfg.Bloom.FalsePositiveRate == 0 {
		cfg.Bloom.FalsePositiveRate = receipts.BloomFalsePositiveRateDefault
	}
	mode := cfg.Mode
	switch mode {
	case ModeBitmap, ModeModule:
	case ModeAuto:
		if mode, err = detect(ctx, cfg.Client); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("redisbloom: unknown mode %q", cfg.Mode)
	}
	return &Filter{rdb: cfg.Client, prefix: cfg.Prefix, mode: mode, m: m, k: k,
		rate: cfg.Bloom.FalsePositiveRate / receipts.BloomHours, cap: cfg.Bloom.ExpectedPerHour}, nil
}

// detect asks the server whether it knows BF.MEXISTS.
func detect(ctx context.Context, rdb redis.UniversalClient) (Mode, error) {
	info, err := rdb.Do(ctx, "COMMAND", "INFO", "BF.MEXISTS").Slice()
	if err != nil {
		return "", fmt.Errorf("redisbloom: look for the RedisBloom module: %w", err)
	}
	if len(info) == 1 && info[0] != nil {
		return ModeModule, nil
	}
	return ModeBitmap, nil
}

// Mode reports how the filters are kept.
func (f *Filter) Mode() Mode { return f.mode }

// hourOf is the hour bucket of t, as receipts counts them.
func hourOf(t time.Time) int64 {
	s := t.Unix()
	h := s / 3600
	if s < 0 && s%3600 != 0 {
		h--
	}
	return h
}

// key names an hour's filter; the hash tag keeps every hour in one slot of
// a cluster, as one script reads them all.
func (f *Filter) key(h int64) string {
	kind := "bits"
	if f.mode == ModeModule {
		kind = "bf"
	}
	return f.prefix + "{receiptbloom}:" + kind + ":" + strconv.FormatInt(h, 10)
}

// window lists the keys of the hours a query at hour h asks, newest first.
func (f *Filter) window(h int64) []string {
	keys := make([]string, receipts.BloomHours)
	for i := range keys {
		keys[i] = f.key(h - int64(i))
	}
	return keys
}

// ttl is how long the filter of at's hour must live from at: until
// BloomHours after the end of its hour.
func ttl(at time.Time) time.Duration {
	end := time.Unix((hourOf(at)+1+receipts.BloomHours)*3600, 0)
	return end.Sub(at)
}

// Test implements receipts.Filter.
func (f *Filter) Test(ctx context.Context, items [][]byte, at time.Time) ([]bool, error) {
	out := make([]bool, 0, len(items))
	for start := 0; start < len(items); start += chunk {
		part := items[start:min(start+chunk, len(items))]
		var got []bool
		var err error
		if f.mode == ModeModule {
			got, err = f.testModule(ctx, part, at)
		} else {
			got, err = f.testBits(ctx, part, at)
		}
		if err != nil {
			return nil, fmt.Errorf("test %d receipt keys: redis: %w", len(items), err)
		}
		out = append(out, got...)
	}
	return out, nil
}

// Insert implements receipts.Filter.
func (f *Filter) Insert(ctx context.Context, items [][]byte, at time.Time) error {
	d := ttl(at)
	for start := 0; start < len(items); start += chunk {
		part := items[start:min(start+chunk, len(items))]
		var err error
		if f.mode == ModeModule {
			err = f.insertModule(ctx, part, at, d)
		} else {
			err = f.insertBits(ctx, part, at, d)
		}
		if err != nil {
			return fmt.Errorf("insert %d receipt keys: redis: %w", len(items), err)
		}
	}
	return nil
}

// positions appends the k bit positions of each item to args.
func (f *Filter) positions(args []any, items [][]byte) []any {
	for _, it := range items {
		for _, l := range bloom.Locations(it, f.k) {
			args = append(args, l%uint64(f.m))
		}
	}
	return args
}

// testScript: KEYS the window's hours; ARGV[1] = k, then k positions per
// item. Returns 1 for an item whose k bits are all set in one hour.
var testScript = redis.NewScript(`
local k = tonumber(ARGV[1])
local live = {}
for _, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 1 then live[#live + 1] = key end
end
local out = {}
for i = 0, (#ARGV - 1) / k - 1 do
  local found = 0
  for _, key in ipairs(live) do
    local all = 1
    for j = 1, k do
      if redis.call('GETBIT', key, ARGV[1 + i * k + j]) == 0 then all = 0 break end
    end
    if all == 1 then found = 1 break end
  end
  out[i + 1] = found
end
return out
`)

// insertScript: KEYS[1] the hour; ARGV[1] its lifetime (ms), then the
// positions to set.
var insertScript = redis.NewScript(`
for i = 2, #ARGV do redis.call('SETBIT', KEYS[1], ARGV[i], 1) end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
`)

func (f *Filter) testBits(ctx context.Context, items [][]byte, at time.Time) ([]bool, error) {
	args := f.positions(append(make([]any, 0, 1+len(items)*int(f.k)), f.k), items)
	res, err := testScript.Run(ctx, f.rdb, f.window(hourOf(at)), args...).Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(res) != len(items) {
		return nil, fmt.Errorf("%d answers for %d items", len(res), len(items))
	}
	out := make([]bool, len(items))
	for i, v := range res {
		out[i] = v == 1
	}
	return out, nil
}

func (f *Filter) insertBits(ctx context.Context, items [][]byte, at time.Time, life time.Duration) error {
	args := f.positions(append(make([]any, 0, 1+len(items)*int(f.k)), life.Milliseconds()), items)
	return insertScript.Run(ctx, f.rdb, []string{f.key(hourOf(at))}, args...).Err()
}

func (f *Filter) testModule(ctx context.Context, items [][]byte, at time.Time) ([]bool, error) {
	pipe := f.rdb.Pipeline()
	var cmds []*redis.BoolSliceCmd
	for _, key := range f.window(hourOf(at)) {
		args := make([]any, 0, len(items))
		for _, it := range items {
			args = append(args, it)
		}
		cmds = append(cmds, pipe.BFMExists(ctx, key, args...))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	out := make([]bool, len(items))
	for _, c := range cmds {
		for i, ok := range c.Val() {
			out[i] = out[i] || ok
		}
	}
	return out, nil
}

func (f *Filter) insertModule(ctx context.Context, items [][]byte, at time.Time, life time.Duration) error {
	key := f.key(hourOf(at))
	args := make([]any, 0, len(items))
	for _, it := range items {
		args = append(args, it)
	}
	pipe := f.rdb.Pipeline()
	pipe.BFInsert(ctx, key, &redis.BFInsertOptions{Capacity: int64(f.cap), Error: f.rate}, args...)
	pipe.PExpire(ctx, key, life)
	_, err := pipe.Exec(ctx)
	return err
}
