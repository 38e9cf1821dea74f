package receipts

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/store"
)

// TestDedupExact: for any sequence of batches over a small key space, with
// any filter size from useless to accurate, the switch flipped at random and
// the clock moving (at most 36 h, inside the window), Dedup reports a key duplicate
// exactly when it was seen before — in an earlier batch or earlier in its
// own — and, for a receipt carrying callback data, only when the copy seen
// carried some too: the copy stored (the first), or one earlier in its
// batch. It holds for Bloom and for FilterDedup over a Bloom. Over a
// filter that fails at random no receipt is lost (a failure is a "maybe"),
// but a key whose insertion failed may come back as new, for the store's
// unique key (L3) to catch.
func TestDedupExact(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		clock := fakeclock.NewAt(t0)
		b, err := NewBloom(BloomConfig{
			ExpectedPerHour:   uint(rapid.IntRange(1, 100).Draw(t, "expected")),
			FalsePositiveRate: rapid.Float64Range(1e-6, 0.999).Draw(t, "rate"),
			Now:               clock.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		var l2 Dedupper = b
		var flaky *flakyFilter
		switch rapid.IntRange(0, 2).Draw(t, "l2") {
		case 1:
			l2 = NewFilterDedup(b, clock.Now, nil, true)
		case 2:
			flaky = &flakyFilter{Filter: b}
			l2 = NewFilterDedup(flaky, clock.Now, nil, true)
		}
		s := newMemStore()
		genKey := rapid.Custom(func(t *rapid.T) store.ReceiptKey {
			return rkey(
				fmt.Sprint("acc", rapid.IntRange(0, 2).Draw(t, "account")),
				fmt.Sprint("m", rapid.IntRange(0, 9).Draw(t, "message")),
				rapid.SampledFrom(receiptTypes).Draw(t, "type"),
			)
		})

		// stored: the keys stored, each with whether the copy stored (the
		// first) carried callback data.
		stored := map[store.ReceiptKey]bool{}
		for range rapid.IntRange(1, 12).Draw(t, "batches") {
			keys := rapid.SliceOfN(genKey, 0, 10).Draw(t, "keys")
			var callback []bool
			if rapid.Bool().Draw(t, "callbacks") {
				callback = rapid.SliceOfN(rapid.Bool(), len(keys), len(keys)).Draw(t, "callback")
			}
			enabled := rapid.Bool().Draw(t, "enabled")
			l2.SetEnabled(enabled)
			if flaky != nil {
				flaky.fail = rapid.Bool().Draw(t, "filter fails")
			}
			clock.Advance(time.Duration(rapid.IntRange(0, 180).Draw(t, "minutes")) * time.Minute)

			dup, bst, err := l2.Dedup(context.Background(), keys, callback, s)
			if err != nil {
				t.Fatal(err)
			}
			// inBatch: the keys seen earlier in the batch, each with
			// whether a copy carrying callback data was among them.
			inBatch := map[store.ReceiptKey]bool{}
			for i, k := range keys {
				cb := callback != nil && callback[i]
				withCB, stored := stored[k]
				batchCB, inB := inBatch[k]
				want := stored || inB
				if cb {
					want = stored && withCB || batchCB
				}
				if dup[i] != want && (flaky == nil || dup[i]) {
					t.Fatalf("key %+v (callback %v): dup = %v, want %v (stored %v with callback %v, earlier in the batch %v with callback %v)",
						k, cb, dup[i], want, stored, withCB, inB, batchCB)
				}
				inBatch[k] = batchCB || cb
			}
			for i, k := range keys {
				if _, ok := stored[k]; !ok && !dup[i] {
					stored[k] = callback != nil && callback[i]
				}
			}
			s.store(keys, callback, dup)
			if bst.Confirmed+bst.Repeats != count(dup) {
				t.Fatalf("stats %+v do not add up to the %d duplicates", bst, count(dup))
			}
			if enabled && bst.Hits != bst.Confirmed+bst.FalsePositives {
				t.Fatalf("stats %+v: hits are not confirmed + false positives", bst)
			}
		}
	})
}

func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// flakyFilter is a Filter whose calls fail while fail is set, as one on an
// unreachable Redis does.
type flakyFilter struct {
	Filter
	fail bool
}

func (f *flakyFilter) Test(ctx context.Context, items [][]byte, at time.Time) ([]bool, error) {
	if f.fail {
		return nil, errors.New("filter unreachable")
	}
	return f.Filter.Test(ctx, items, at)
}

func (f *flakyFilter) Insert(ctx context.Context, items [][]byte, at time.Time) error {
	if f.fail {
		return errors.New("filter unreachable")
	}
	return f.Filter.Insert(ctx, items, at)
}
