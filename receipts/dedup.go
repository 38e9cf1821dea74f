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
}

var _ Confirmer = store.ReceiptStore(nil)

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
// confirm says, or equal to an earlier key of the batch. A filter hit is
// only a reason to ask confirm, so a false positive costs one lookup and
// never a receipt (guarantee 5). A miss is trusted without asking: keys
// are added to the filter here, before the caller stores them, so a stored
// key the filter does not know is older than the window (or predates a
// restart) and the store's unique key (L3) still catches it.
//
// Every distinct key is added to the bucket of the current hour, unless
// confirm fails: then nothing is recorded and the error says why, so the
// batch can be retried as it was.
//
// Two Dedup calls running at once with the same new key may both call it
// new; the pipeline gives each account to one processor, so they do not,
// and L3 would catch it if they did.
func (b *Bloom) Dedup(ctx context.Context, keys []store.ReceiptKey, confirm Confirmer) ([]bool, DedupStats, error) {
	st := DedupStats{Keys: len(keys)}
	if err := ctx.Err(); err != nil {
		return nil, st, fmt.Errorf("receipts: dedup of %d keys: %w", len(keys), err)
	}
	on := b.Enabled()
	hour := hourOf(b.now())
	dup := make([]bool, len(keys))
	locs := make([][]uint64, len(keys)) // nil for in-batch repeats
	var first map[store.ReceiptKey]struct{}
	if len(keys) > 1 {
		first = make(map[store.ReceiptKey]struct{}, len(keys))
	}
	var buf []byte
	for i, k := range keys {
		if first != nil {
			if _, ok := first[k]; ok {
				dup[i] = true
				st.Repeats++
				continue
			}
			first[k] = struct{}{}
		}
		buf = appendKey(buf[:0], k)
		locs[i] = bloom.Locations(buf, b.k)
	}

	var check []int // indexes of the keys to confirm
	b.mu.RLock()
	live := b.live(hour)
	for i, l := range locs {
		switch {
		case l == nil:
		case !on:
			check = append(check, i)
		case b.test(l, live):
			st.Hits++
			check = append(check, i)
		}
	}
	b.mu.RUnlock()

	if len(check) > 0 {
		ask := make([]store.ReceiptKey, len(check))
		for j, i := range check {
			ask[j] = keys[i]
		}
		st.Checked = len(ask)
		stored, err := confirm.HasReceipts(ctx, ask)
		if err != nil {
			return nil, st, fmt.Errorf("receipts: confirming %d keys against the store: %w", len(ask), err)
		}
		if len(stored) != len(ask) {
			return nil, st, fmt.Errorf("receipts: confirming %d keys: the store answered %d", len(ask), len(stored))
		}
		for j, i := range check {
			switch {
			case stored[j]:
				dup[i] = true
				st.Confirmed++
			case on:
				st.FalsePositives++
			}
		}
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
