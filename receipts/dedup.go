package receipts

import (
	"context"
	"fmt"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/wamux/wamux/store"
)

// Confirmer answers for sure whether receipts are stored; the Bloom layer
// asks it about every hit. store.Store satisfies it.
type Confirmer interface {
	HasReceipts(ctx context.Context, keys []store.ReceiptKey) ([]bool, error)
	// HasCallbackReceipts confirms the hits of receipts that carry
	// callback data: they repeat only a stored copy that carried some.
	HasCallbackReceipts(ctx context.Context, keys []store.ReceiptKey) ([]bool, error)
}

var _ Confirmer = store.ReceiptStore(nil)

// copies tells, for the keys of one batch, whether a copy carrying
// callback data was among those seen so far (false: only copies without).
// A copy repeats an earlier one unless it carries callback data and none
// of the earlier did: the merge resolves the outbound message its
// callback data names (an unknown send), which a copy without (an agent's,
// which only knows the wamid) could not.
type copies map[store.ReceiptKey]bool

// repeat reports whether a copy of k (callback: carrying callback data)
// repeats one seen before, and records it.
func (c copies) repeat(k store.ReceiptKey, callback bool) bool {
	withCB, ok := c[k]
	if ok && (withCB || !callback) {
		return true
	}
	c[k] = callback
	return false
}

// callbackMarker ends the filter key of a receipt carrying callback data
// (appendKey's, which ends with the receipt type, valid UTF-8 that never
// holds it), so that its hits are hits of such receipts alone. A
// collision would only be a false positive, which the store denies.
const callbackMarker = 0xff

// DedupStats counts what one Dedup call did, for the dedup metrics.
type DedupStats struct {
	// Keys is the batch size.
	Keys int
	// Repeats are keys equal to an earlier key of the same batch: duplicates
	// known without asking anyone.
	Repeats int
	// Hits are keys the filter said it may have seen (0 when it is off).
	Hits int
	// Checked are keys sent to the confirmer: the hits, or every distinct
	// key when the filter is off.
	Checked int
	// Confirmed are checked keys the confirmer found stored: duplicates.
	Confirmed int
	// FalsePositives are hits the confirmer did not find stored.
	FalsePositives int
}

// Dedup reports for each key whether it is a duplicate: stored already, as
// confirm says, or equal to an earlier key of the batch. callback[i] says
// whether keys[i]'s receipt carries callback data (nil: none does); such a
// receipt is a duplicate only of a copy that carried some too (copies),
// so the filter knows it under a key of its own (callbackMarker) and the
// store confirms it with HasCallbackReceipts. A receipt without callback
// data repeats either copy: it asks the filter under both keys. A filter
// hit is only a reason to ask confirm, so a false positive costs one
// lookup and never a receipt (guarantee 5). A miss is trusted without
// asking: keys are added to the filter here, before the caller stores
// them, so a stored key the filter does not know is older than the window
// (or predates a restart) and the store's unique key (L3) still catches
// it.
//
// Every distinct key is added to the bucket of the current hour, unless
// confirm fails: then nothing is recorded and the error says why, so the
// batch can be retried as it was.
//
// Two Dedup calls running at once with the same new key may both call it
// new; the pipeline gives each account to one processor, so they do not,
// and L3 would catch it if they did.
func (b *Bloom) Dedup(ctx context.Context, keys []store.ReceiptKey, callback []bool, confirm Confirmer) ([]bool, DedupStats, error) {
	st := DedupStats{Keys: len(keys)}
	if err := ctx.Err(); err != nil {
		return nil, st, fmt.Errorf("receipts: dedup of %d keys: %w", len(keys), err)
	}
	if callback != nil && len(callback) != len(keys) {
		return nil, st, errCallbackFlags(len(keys), len(callback))
	}
	on := b.Enabled()
	hour := hourOf(b.now())
	dup := make([]bool, len(keys))
	locs, alt := b.locations(keys, callback, on, dup, &st)
	check, checkCB := b.toConfirm(locs, alt, callback, on, hour, &st)
	if err := confirmKeys(ctx, confirm, false, keys, check, on, dup, &st); err != nil {
		return nil, st, err
	}
	if err := confirmKeys(ctx, confirm, true, keys, checkCB, on, dup, &st); err != nil {
		return nil, st, err
	}
	b.mu.Lock()
	for _, l := range locs {
		if l != nil {
			b.add(l, hour)
		}
	}
	b.mu.Unlock()
	return dup, st, nil
}

// locations marks the repeats inside the batch in dup and returns, for
// every other key, the bit locations it is added under (locs: its callback
// key when its receipt carries callback data) and, for a receipt without,
// those of its callback key too (alt; only while the filter is on).
func (b *Bloom) locations(keys []store.ReceiptKey, callback []bool, on bool, dup []bool, st *DedupStats) (locs, alt [][]uint64) {
	locs = make([][]uint64, len(keys)) // nil for in-batch repeats
	var first copies
	if len(keys) > 1 {
		first = make(copies, len(keys))
	}
	var buf []byte
	for i, k := range keys {
		cb := callback != nil && callback[i]
		if first != nil && first.repeat(k, cb) {
			dup[i] = true
			st.Repeats++
			continue
		}
		buf = appendKey(buf[:0], k)
		if !cb {
			locs[i] = bloom.Locations(buf, b.k)
			if !on {
				continue
			}
			if alt == nil {
				alt = make([][]uint64, len(keys))
			}
		}
		buf = append(buf, callbackMarker)
		l := bloom.Locations(buf, b.k)
		if cb {
			locs[i] = l
		} else {
			alt[i] = l
		}
	}
	return locs, alt
}

// toConfirm lists the keys to confirm against the store, by how: any
// stored copy (check), or one with callback data (checkCB). With the
// filter on those are its hits; off, every key but in-batch repeats.
func (b *Bloom) toConfirm(locs, alt [][]uint64, callback []bool, on bool, hour int64, st *DedupStats) (check, checkCB []int) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	live := b.live(hour)
	for i, l := range locs {
		cb := callback != nil && callback[i]
		switch {
		case l == nil:
			continue
		case !on:
		case b.test(l, live), !cb && b.test(alt[i], live):
			st.Hits++
		default:
			continue
		}
		if cb {
			checkCB = append(checkCB, i)
		} else {
			check = append(check, i)
		}
	}
	return check, checkCB
}

// confirmKeys asks confirm whether keys[idx] are stored (with callback
// data, when callback), marks the stored ones duplicates and counts them.
func confirmKeys(ctx context.Context, confirm Confirmer, callback bool, keys []store.ReceiptKey, idx []int,
	on bool, dup []bool, st *DedupStats) error {
	if len(idx) == 0 {
		return nil
	}
	asked := make([]store.ReceiptKey, len(idx))
	for j, i := range idx {
		asked[j] = keys[i]
	}
	st.Checked += len(asked)
	var stored []bool
	var err error
	if callback {
		stored, err = confirm.HasCallbackReceipts(ctx, asked)
	} else {
		stored, err = confirm.HasReceipts(ctx, asked)
	}
	if err != nil {
		return fmt.Errorf("receipts: confirming %d keys against the store: %w", len(asked), err)
	}
	if len(stored) != len(asked) {
		return fmt.Errorf("receipts: confirming %d keys: the store answered %d", len(asked), len(stored))
	}
	for j, i := range idx {
		switch {
		case stored[j]:
			dup[i] = true
			st.Confirmed++
		case on:
			st.FalsePositives++
		}
	}
	return nil
}

func errCallbackFlags(keys, flags int) error {
	return fmt.Errorf("receipts: dedup of %d keys with %d callback flags", keys, flags)
}

func errFilterAnswer(asked, got int) error {
	return fmt.Errorf("receipts: asked the Bloom filter about %d items, it answered %d", asked, got)
}
