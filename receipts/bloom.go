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
	// of them. Memory per hour is about -ExpectedPerHour·ln(rate/48)/ln²2
	// bits: 441 KB with the defaults, 21 MB for the window.
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
// The buckets form a ring indexed by hour: the filter of an hour is cleared
// and reused when a key of the hour 48 h later is added, so the window
// rotates with time and nothing runs in the background.
//
// Bloom is safe for concurrent use.
type Bloom struct {
	now  func() time.Time
	m, k uint
	off  atomic.Bool

	mu      sync.RWMutex
	buckets [BloomHours]bucket
}

// bucket is the filter of one hour; hour counts hours since the Unix epoch
// and is meaningful only once f exists (filters are made on first use, so
// an idle gateway does not carry the whole window).
type bucket struct {
	hour int64
	f    *bloom.BloomFilter
}

// NewBloom builds an L2 filter; a rate outside (0, 1) is an error.
func NewBloom(cfg BloomConfig) (*Bloom, error) {
	if cfg.ExpectedPerHour == 0 {
		cfg.ExpectedPerHour = BloomExpectedPerHourDefault
	}
	if cfg.FalsePositiveRate == 0 {
		cfg.FalsePositiveRate = BloomFalsePositiveRateDefault
	}
	if !(cfg.FalsePositiveRate > 0 && cfg.FalsePositiveRate < 1) {
		return nil, fmt.Errorf("receipts: Bloom false-positive rate must be in (0, 1), got %v", cfg.FalsePositiveRate)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m, k := bloom.EstimateParameters(cfg.ExpectedPerHour, cfg.FalsePositiveRate/BloomHours)
	b := &Bloom{now: cfg.Now, m: m, k: k}
	b.off.Store(cfg.Disabled)
	return b, nil
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
	return b.test(locs, hourOf(at))
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

// test reports whether every location is set in one of the filters of the
// window ending with hour h. The caller holds mu for reading.
func (b *Bloom) test(locs []uint64, h int64) bool {
	for i := range b.buckets {
		bk := &b.buckets[i]
		if bk.f != nil && bk.hour <= h && bk.hour > h-BloomHours && bk.f.TestLocations(locs) {
			return true
		}
	}
	return false
}

// add sets locs in the filter of hour h, rotating its slot if it holds an
// older hour. The caller holds mu.
func (b *Bloom) add(locs []uint64, h int64) {
	bk := &b.buckets[slot(h)]
	switch {
	case bk.f == nil:
		bk.f = bloom.New(b.m, b.k)
		bk.hour = h
	case bk.hour > h:
		return
	case bk.hour < h:
		bk.f.ClearAll()
		bk.hour = h
	}
	// The same locations as bloom's own Add, without hashing the key again.
	bits := bk.f.BitSet()
	for _, l := range locs {
		bits.Set(uint(l % uint64(b.m)))
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
