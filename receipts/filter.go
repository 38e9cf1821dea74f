package receipts

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/wamux/wamux/store"
)

// Filter is the storage of L2: Bloom filters of items by hour bucket
// over the last BloomHours hours. Bloom keeps them in process;
// receipts/redisbloom keeps them in Redis, shared by every node. Both
// pass receipts/filtertest.
type Filter interface {
	// Test reports for each item whether it may have been added in the
	// BloomHours hours that end with at's hour. False is certain.
	Test(ctx context.Context, items [][]byte, at time.Time) ([]bool, error)
	// Insert records items in the filter of at's hour.
	Insert(ctx context.Context, items [][]byte, at time.Time) error
}

// Dedupper is L2 as the pipeline uses it: Bloom, or FilterDedup over
// another Filter.
type Dedupper interface {
	// Dedup is (*Bloom).Dedup.
	Dedup(ctx context.Context, keys []store.ReceiptKey, callback []bool, confirm Confirmer) ([]bool, DedupStats, error)
	// SetEnabled switches the layer on or off (see Bloom.SetEnabled).
	SetEnabled(on bool)
}

var (
	_ Filter   = (*Bloom)(nil)
	_ Dedupper = (*Bloom)(nil)
	_ Dedupper = (*FilterDedup)(nil)
)

// Test implements Filter.
func (b *Bloom) Test(_ context.Context, items [][]byte, at time.Time) ([]bool, error) {
	out := make([]bool, len(items))
	b.mu.RLock()
	defer b.mu.RUnlock()
	live := b.live(hourOf(at))
	for i, it := range items {
		out[i] = b.test(bloom.Locations(it, b.k), live)
	}
	return out, nil
}

// Insert implements Filter.
func (b *Bloom) Insert(_ context.Context, items [][]byte, at time.Time) error {
	h := hourOf(at)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, it := range items {
		b.add(bloom.Locations(it, b.k), h)
	}
	return nil
}

// FilterDedup is L2 over any Filter, with Bloom.Dedup's rules. A Filter
// that fails degrades to "maybe": every key is confirmed by the store, so
// an unreachable Redis costs lookups, never a receipt.
type FilterDedup struct {
	f   Filter
	now func() time.Time
	log *slog.Logger
	off atomic.Bool
	// failing is set while the Filter fails, so that the change is
	// logged once each way.
	failing atomic.Bool
}

// NewFilterDedup builds L2 over f; now is the clock of the hour buckets
// (time.Now when nil), log where the Filter's failures are reported (none
// when nil).
func NewFilterDedup(f Filter, now func() time.Time, log *slog.Logger, enabled bool) *FilterDedup {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &FilterDedup{f: f, now: now, log: log}
	d.off.Store(!enabled)
	return d
}

// SetEnabled implements Dedupper.
func (d *FilterDedup) SetEnabled(on bool) { d.off.Store(!on) }

// Dedup implements Dedupper: what Bloom.Dedup does, asking the Filter.
func (d *FilterDedup) Dedup(ctx context.Context, keys []store.ReceiptKey, callback []bool, confirm Confirmer) ([]bool, DedupStats, error) {
	st := DedupStats{Keys: len(keys)}
	if err := ctx.Err(); err != nil {
		return nil, st, fmt.Errorf("receipts: dedup of %d keys: %w", len(keys), err)
	}
	if callback != nil && len(callback) != len(keys) {
		return nil, st, errCallbackFlags(len(keys), len(callback))
	}
	on := !d.off.Load()
	at := d.now()
	dup := make([]bool, len(keys))
	items, alt := itemsOf(keys, callback, on, dup, &st)
	hit := d.test(ctx, items, alt, on, at)
	var check, checkCB []int
	for i, it := range items {
		if it == nil || (on && !hit[i]) {
			continue
		}
		if on {
			st.Hits++
		}
		if callback != nil && callback[i] {
			checkCB = append(checkCB, i)
		} else {
			check = append(check, i)
		}
	}
	if err := confirmKeys(ctx, confirm, false, keys, check, on, dup, &st); err != nil {
		return nil, st, err
	}
	if err := confirmKeys(ctx, confirm, true, keys, checkCB, on, dup, &st); err != nil {
		return nil, st, err
	}
	var add [][]byte
	for _, it := range items {
		if it != nil {
			add = append(add, it)
		}
	}
	if len(add) > 0 {
		d.report(d.f.Insert(ctx, add, at))
	}
	return dup, st, nil
}

// test asks the Filter about items and, for receipts without callback
// data, their callback keys (alt); hit[i] says either may be known. A
// Filter that fails answers "maybe" for every item.
func (d *FilterDedup) test(ctx context.Context, items, alt [][]byte, on bool, at time.Time) []bool {
	hit := make([]bool, len(items))
	if !on {
		return hit
	}
	var ask [][]byte
	var owner []int
	for i := range items {
		if items[i] == nil {
			continue
		}
		ask, owner = append(ask, items[i]), append(owner, i)
		if alt[i] != nil {
			ask, owner = append(ask, alt[i]), append(owner, i)
		}
	}
	if len(ask) == 0 {
		return hit
	}
	got, err := d.f.Test(ctx, ask, at)
	if err == nil && len(got) != len(ask) {
		err = errFilterAnswer(len(ask), len(got))
	}
	d.report(err)
	for j, i := range owner {
		hit[i] = hit[i] || err != nil || got[j]
	}
	return hit
}

// report logs the Filter's failures, once when they start and once when
// they end.
func (d *FilterDedup) report(err error) {
	if err != nil {
		if !d.failing.Swap(true) {
			d.log.Warn("receipt Bloom filter failing: every receipt is checked in the store", "err", err)
		}
		return
	}
	if d.failing.Swap(false) {
		d.log.Info("receipt Bloom filter answers again")
	}
}

// itemsOf marks the repeats inside the batch in dup and returns, for every
// other key, the item it is added under (its callback key when its receipt
// carries callback data) and, for a receipt without, its callback key too
// (alt; only while the filter is on).
func itemsOf(keys []store.ReceiptKey, callback []bool, on bool, dup []bool, st *DedupStats) (items, alt [][]byte) {
	items = make([][]byte, len(keys))
	alt = make([][]byte, len(keys))
	var first copies
	if len(keys) > 1 {
		first = make(copies, len(keys))
	}
	for i, k := range keys {
		cb := callback != nil && callback[i]
		if first != nil && first.repeat(k, cb) {
			dup[i] = true
			st.Repeats++
			continue
		}
		it := appendKey(nil, k)
		if cb {
			items[i] = append(it, callbackMarker)
			continue
		}
		items[i] = it
		if on {
			alt[i] = append(appendKey(nil, k), callbackMarker)
		}
	}
	return items, alt
}
