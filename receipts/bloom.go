package receipts

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/wamux/wamux/store"
)

// BloomHours is how far back L2 remembers: one filter per hour, 48 of them.
// Receipts older than that are rare enough to leave to the store's unique
// key (L3) alone.
const BloomHours = 48

// Defaults of BloomConfig.
const (
	BloomExpectedPerHourDefault   = 200_000
	BloomFalsePositiveRateDefault = 0.01
)

// BloomConfig sizes L2; zero fields take the defaults.
type BloomConfig struct {
	// ExpectedPerHour is how many distinct receipt keys one hour holds at
	// the designed false-positive rate; beyond it the rate climbs.
	ExpectedPerHour uint
	// FalsePositiveRate is the target rate of a MayContain "yes" for a key
	// never added, over the whole 48 h window at ExpectedPerHour keys an
	// hour. Each hour's filter gets a 48th of it, since a query asks all
	// of them. Each hour's filter has m = -ExpectedPerHour·ln(rate/48)/ln²2
	// bits, and the window takes m 64-bit words: 28 MB with the defaults.
	FalsePositiveRate float64
	// Now is the clock Dedup reads; time.Now when nil.
	Now func() time.Time
	// Disabled starts the Bloom layer switched off (see SetEnabled).
	Disabled bool
}

// Bloom is L2 of the dedup chain: Bloom filters of receipt keys by hour
// bucket over the last BloomHours hours. A "no" is certain and saves the
// store a lookup; a "maybe" is only ever a reason to ask the store (Dedup),
// never a reason to drop a receipt.
//
// The 48 hourly filters share one size and one set of hash functions, so a
// key sits at the same bit positions in each; they are stored bit-sliced —
// word i holds bit i of every hour, hour slot s in bit s — and one lookup
// ANDs k words instead of probing 48 filters: a miss, the common answer,
// costs a few cache misses instead of about a hundred. The slots form a ring
// by hour: a slot is cleared and reused when a key of the hour 48 h after
// its own is added (one pass over the words, once an hour), so the window
// rotates with time and nothing runs in the background.
//
// Bloom is safe for concurrent use.
type Bloom struct {
	now  func() time.Time
	m, k uint
	off  atomic.Bool

	mu sync.RWMutex
	// words is made on the first Add, so an idle gateway carries none of it.
	words []uint64
	// hours[s] is the hour (since the Unix epoch) slot s holds, if bit s of
	// used is set.
	hours [BloomHours]int64
	used  uint64
}

// NewBloom builds an L2 filter; a rate outside (0, 1) is an error.
func NewBloom(cfg BloomConfig) (*Bloom, error) {
	m, k, err := cfg.parameters()
	if err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	b := &Bloom{now: cfg.Now, m: m, k: k}
	b.off.Store(cfg.Disabled)
	return b, nil
}

// parameters returns the bits per hourly filter and the hash count, with
// the defaults filled in.
func (cfg BloomConfig) parameters() (m, k uint, err error) {
	if cfg.ExpectedPerHour == 0 {
		cfg.ExpectedPerHour = BloomExpectedPerHourDefault
	}
	if cfg.FalsePositiveRate == 0 {
		cfg.FalsePositiveRate = BloomFalsePositiveRateDefault
	}
	if !(cfg.FalsePositiveRate > 0 && cfg.FalsePositiveRate < 1) {
		return 0, 0, fmt.Errorf("receipts: Bloom false-positive rate must be in (0, 1), got %v", cfg.FalsePositiveRate)
	}
	m, k = bloom.EstimateParameters(cfg.ExpectedPerHour, cfg.FalsePositiveRate/BloomHours)
	return m, k, nil
}

// Parameters returns the bits of each hourly filter and the number of
// hash functions, with the defaults filled in, or the configuration's
// error; a filter kept elsewhere (receipts/redisbloom) sizes itself alike.
func (cfg BloomConfig) Parameters() (m, k uint, err error) { return cfg.parameters() }

// MemoryBytes is what a filter of this configuration allocates at its
// first Add (0 for an invalid one), so an operator sizing it for a larger
// volume sees the price before it is paid.
func (cfg BloomConfig) MemoryBytes() int {
	m, _, err := cfg.parameters()
	if err != nil {
		return 0
	}
	return int(m) * 8
}

// SetEnabled switches the Bloom layer on or off at runtime. Off, Dedup
// sends every key to the confirmer and ignores the filter's answer — the
// degradation switch for when it misbehaves or the store is cheap enough —
// but keeps adding keys, so switching back on has no cold window.
func (b *Bloom) SetEnabled(on bool) { b.off.Store(!on) }

// Enabled reports whether Dedup consults the filter.
func (b *Bloom) Enabled() bool { return !b.off.Load() }

// MayContain reports whether key may have been added in the 48 hours that
// end with the hour of at. False is certain; true may be a false positive.
func (b *Bloom) MayContain(key store.ReceiptKey, at time.Time) bool {
	locs := bloom.Locations(appendKey(nil, key), b.k)
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.test(locs, b.live(hourOf(at)))
}

// Add records key in the bucket of at's hour. A key for an hour that has
// already rotated out (48 h older than a key added since) is not recorded:
// it would be outside every window asked about from then on.
func (b *Bloom) Add(key store.ReceiptKey, at time.Time) {
	locs := bloom.Locations(appendKey(nil, key), b.k)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.add(locs, hourOf(at))
}

// live returns the slots that hold an hour of the window ending with hour
// h, as a bit mask. The caller holds mu.
func (b *Bloom) live(h int64) uint64 {
	var mask uint64
	for s, hour := range b.hours {
		if b.used&(1<<s) != 0 && hour <= h && hour > h-BloomHours {
			mask |= 1 << s
		}
	}
	return mask
}

// test reports whether some slot in mask has every location set. The
// caller holds mu for reading.
func (b *Bloom) test(locs []uint64, mask uint64) bool {
	if mask == 0 {
		return false
	}
	for _, l := range locs {
		mask &= b.words[l%uint64(b.m)]
		if mask == 0 {
			return false
		}
	}
	return true
}

// add sets locs in the slot of hour h, rotating it if it holds an older
// hour. The caller holds mu.
func (b *Bloom) add(locs []uint64, h int64) {
	s := slot(h)
	bit := uint64(1) << s
	switch {
	case b.used&bit == 0:
		if b.words == nil {
			b.words = make([]uint64, b.m)
		}
		b.used |= bit
		b.hours[s] = h
	case b.hours[s] > h:
		return
	case b.hours[s] < h:
		for i := range b.words {
			b.words[i] &^= bit
		}
		b.hours[s] = h
	}
	for _, l := range locs {
		b.words[l%uint64(b.m)] |= bit
	}
}

// hourOf is the hour bucket of t: whole hours since the Unix epoch.
func hourOf(t time.Time) int64 {
	s := t.Unix()
	h := s / 3600
	if s < 0 && s%3600 != 0 {
		h-- // floor, so the hour before the epoch is -1, not 0
	}
	return h
}

func slot(h int64) int {
	s := int(h % BloomHours)
	if s < 0 {
		s += BloomHours
	}
	return s
}

// appendKey encodes key unambiguously (length-prefixed), so that account
// "a" with message "bc" and account "ab" with message "c" hash apart.
func appendKey(buf []byte, key store.ReceiptKey) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(key.AccountID)))
	buf = append(buf, key.AccountID...)
	buf = binary.AppendUvarint(buf, uint64(len(key.MessageID)))
	buf = append(buf, key.MessageID...)
	return append(buf, key.Type...)
}
