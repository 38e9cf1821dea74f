package receipts

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/store"
)

// memStore is the smallest store the dedup step talks to: a set of stored
// keys, each with whether its row carries callback data. The pipeline test
// runs the same checks on the real stores.
type memStore struct {
	mu     sync.Mutex
	keys   map[store.ReceiptKey]bool
	asked  int
	failed error
}

func newMemStore() *memStore { return &memStore{keys: map[store.ReceiptKey]bool{}} }

func (s *memStore) HasReceipts(ctx context.Context, keys []store.ReceiptKey) ([]bool, error) {
	return s.has(keys, false)
}

func (s *memStore) HasCallbackReceipts(ctx context.Context, keys []store.ReceiptKey) ([]bool, error) {
	return s.has(keys, true)
}

func (s *memStore) has(keys []store.ReceiptKey, callback bool) ([]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return nil, s.failed
	}
	s.asked += len(keys)
	out := make([]bool, len(keys))
	for i, k := range keys {
		withCB, ok := s.keys[k]
		out[i] = ok && (withCB || !callback)
	}
	return out, nil
}

// store records the keys Dedup called new, as the pipeline does next: the
// first copy stored is kept (L3), with callback data if callback says so
// (nil: none).
func (s *memStore) store(keys []store.ReceiptKey, callback, dup []bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, k := range keys {
		if _, ok := s.keys[k]; !ok && !dup[i] {
			s.keys[k] = callback != nil && callback[i]
		}
	}
}

func dedup(t *testing.T, b *Bloom, s *memStore, keys ...store.ReceiptKey) ([]bool, DedupStats) {
	t.Helper()
	return dedupCB(t, b, s, keys, nil)
}

// dedupCB is dedup of receipts with callback data where callback says.
func dedupCB(t *testing.T, b *Bloom, s *memStore, keys []store.ReceiptKey, callback []bool) ([]bool, DedupStats) {
	t.Helper()
	dup, st, err := b.Dedup(context.Background(), keys, callback, s)
	if err != nil {
		t.Fatalf("Dedup: %v", err)
	}
	if len(dup) != len(keys) {
		t.Fatalf("Dedup returned %d answers for %d keys", len(dup), len(keys))
	}
	s.store(keys, callback, dup)
	return dup, st
}

func keysN(prefix string, n int) []store.ReceiptKey {
	ks := make([]store.ReceiptKey, n)
	for i := range ks {
		ks[i] = rkey("acc", fmt.Sprint(prefix, i), wamux.ReceiptDelivered)
	}
	return ks
}

// TestDedupTinyFilterLosesNothing is guarantee 5. The filter is so small
// that nearly every key is a hit, yet every new key comes out new: hits are
// confirmed, never trusted.
func TestDedupTinyFilterLosesNothing(t *testing.T) {
	clock := fakeclock.NewAt(t0)
	b := newTestBloom(t, BloomConfig{ExpectedPerHour: 1, FalsePositiveRate: 0.999, Now: clock.Now})
	s := newMemStore()

	const batches, perBatch = 20, 50
	var total DedupStats
	for i := range batches {
		keys := keysN(fmt.Sprint("b", i, "-"), perBatch)
		dup, st := dedup(t, b, s, keys...)
		for j, d := range dup {
			if d {
				t.Fatalf("batch %d: new key %+v reported duplicate", i, keys[j])
			}
		}
		if st.Confirmed != 0 || st.FalsePositives != st.Hits {
			t.Fatalf("batch %d: stats %+v, want every hit a false positive", i, st)
		}
		total.Hits += st.Hits
		clock.Advance(10 * time.Minute)
	}
	if total.Hits < batches*perBatch*9/10 {
		t.Fatalf("only %d hits of %d keys: the filter is not tiny enough to prove anything", total.Hits, batches*perBatch)
	}

	// And the duplicates are still caught.
	keys := keysN("b3-", perBatch)
	dup, st := dedup(t, b, s, keys...)
	for j, d := range dup {
		if !d {
			t.Fatalf("stored key %+v not reported duplicate", keys[j])
		}
	}
	if st.Confirmed != perBatch || st.FalsePositives != 0 {
		t.Fatalf("stats %+v, want %d confirmed and no false positives", st, perBatch)
	}
}

func TestDedupStats(t *testing.T) {
	b := newTestBloom(t, accurate(fakeclock.NewAt(t0)))
	s := newMemStore()
	a, c := rkey("acc", "a", wamux.ReceiptSent), rkey("acc", "c", wamux.ReceiptSent)
	dedup(t, b, s, a)
	// A key the filter knows but the store lost (the pipeline failed after
	// Dedup, say): a hit, not confirmed.
	lost := rkey("acc", "lost", wamux.ReceiptSent)
	b.Add(lost, t0)

	dup, st := dedup(t, b, s, a, c, a, lost, c)
	want := []bool{true, false, true, false, true}
	for i := range want {
		if dup[i] != want[i] {
			t.Fatalf("dup = %v, want %v", dup, want)
		}
	}
	wantSt := DedupStats{Keys: 5, Repeats: 2, Hits: 2, Checked: 2, Confirmed: 1, FalsePositives: 1}
	if st != wantSt {
		t.Fatalf("stats = %+v, want %+v", st, wantSt)
	}
	if s.asked != 2 {
		t.Fatalf("store asked about %d keys in all, want only the 2 hits", s.asked)
	}
}

// TestDedupDisabled: off, every distinct key goes to the store, and keys
// keep being added so that switching back on is warm at once.
func TestDedupDisabled(t *testing.T) {
	b := newTestBloom(t, accurate(fakeclock.NewAt(t0)))
	s := newMemStore()
	b.SetEnabled(false)
	if b.Enabled() {
		t.Fatal("SetEnabled(false) left the layer on")
	}
	a, c := rkey("acc", "a", wamux.ReceiptSent), rkey("acc", "c", wamux.ReceiptSent)
	dedup(t, b, s, a)

	dup, st := dedup(t, b, s, a, c, c)
	if !dup[0] || dup[1] || !dup[2] {
		t.Fatalf("dup = %v, want [true false true]", dup)
	}
	wantSt := DedupStats{Keys: 3, Repeats: 1, Checked: 2, Confirmed: 1}
	if st != wantSt {
		t.Fatalf("stats off = %+v, want %+v", st, wantSt)
	}

	b.SetEnabled(true)
	asked := s.asked
	dup, st = dedup(t, b, s, a, c, rkey("acc", "new", wamux.ReceiptSent))
	if !dup[0] || !dup[1] || dup[2] {
		t.Fatalf("dup = %v, want [true true false]", dup)
	}
	if st.Hits != 2 || s.asked-asked != 2 {
		t.Fatalf("after switching on: %+v, store asked %d; want the 2 keys added while off to hit", st, s.asked-asked)
	}
}

// TestDedupStoreError: a failing store fails the batch and records nothing,
// so the retry sees the batch exactly as the first attempt did.
func TestDedupStoreError(t *testing.T) {
	b := newTestBloom(t, accurate(fakeclock.NewAt(t0)))
	s := newMemStore()
	a := rkey("acc", "a", wamux.ReceiptSent)
	dedup(t, b, s, a)

	boom := errors.New("disk on fire")
	s.failed = boom
	fresh := rkey("acc", "fresh", wamux.ReceiptSent)
	if _, _, err := b.Dedup(context.Background(), []store.ReceiptKey{a, fresh}, nil, s); !errors.Is(err, boom) {
		t.Fatalf("Dedup error = %v, want it to wrap %v", err, boom)
	}
	if b.MayContain(fresh, t0) {
		t.Fatal("a failed batch recorded its keys")
	}
	s.failed = nil
	dup, _ := dedup(t, b, s, a, fresh)
	if !dup[0] || dup[1] {
		t.Fatalf("retry dup = %v, want [true false]", dup)
	}
}

type shortConfirmer struct{}

func (shortConfirmer) HasReceipts(context.Context, []store.ReceiptKey) ([]bool, error) {
	return nil, nil
}

func (shortConfirmer) HasCallbackReceipts(context.Context, []store.ReceiptKey) ([]bool, error) {
	return nil, nil
}

func TestDedupShortAnswer(t *testing.T) {
	b := newTestBloom(t, BloomConfig{Disabled: true, Now: fakeclock.NewAt(t0).Now})
	if _, _, err := b.Dedup(context.Background(), keysN("k", 3), nil, shortConfirmer{}); err == nil {
		t.Fatal("Dedup accepted a confirmer answer of the wrong length")
	}
	if _, _, err := b.Dedup(context.Background(), keysN("k", 3), []bool{true, true, true}, shortConfirmer{}); err == nil {
		t.Fatal("Dedup accepted a confirmer answer of the wrong length for receipts with callback data")
	}
}

func TestDedupCanceled(t *testing.T) {
	b := newTestBloom(t, accurate(fakeclock.NewAt(t0)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := b.Dedup(ctx, keysN("k", 3), nil, newMemStore()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Dedup on a canceled context = %v, want context.Canceled", err)
	}
}

// TestDedupForgetsAfterWindow: 48 h on, the filter no longer knows a key,
// so Dedup calls it new without asking; the store's unique key (L3) is what
// catches a receipt that old.
func TestDedupForgetsAfterWindow(t *testing.T) {
	clock := fakeclock.NewAt(t0)
	b := newTestBloom(t, accurate(clock))
	s := newMemStore()
	a := rkey("acc", "a", wamux.ReceiptSent)
	dedup(t, b, s, a)

	clock.Advance(BloomHours*time.Hour - time.Nanosecond)
	if dup, st := dedup(t, b, s, a); !dup[0] || st.Hits != 1 {
		t.Fatalf("just inside the window: dup %v, stats %+v; want a confirmed hit", dup, st)
	}
	// That Dedup re-added a in the current hour, so it lives on from here.
	clock.Advance(BloomHours * time.Hour)
	if dup, st := dedup(t, b, s, a); dup[0] || st.Hits != 0 || st.Checked != 0 {
		t.Fatalf("past the window: dup %v, stats %+v; want an unchecked miss", dup, st)
	}
}

// TestDedupConcurrent runs one processor per account at once, toggling the
// switch meanwhile; the race detector checks the locking, and each account
// must still see exactly its own repeats.
func TestDedupConcurrent(t *testing.T) {
	clock := fakeclock.NewAt(t0)
	b := newTestBloom(t, BloomConfig{ExpectedPerHour: 100, FalsePositiveRate: 0.5, Now: clock.Now})
	s := newMemStore()
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() {
			acc := fmt.Sprint("acc", p)
			for round := range 20 {
				keys := []store.ReceiptKey{
					rkey(acc, fmt.Sprint("m", round), wamux.ReceiptSent),
					rkey(acc, fmt.Sprint("m", round/2), wamux.ReceiptSent),
				}
				dup, _, err := b.Dedup(context.Background(), keys, nil, s)
				if err != nil {
					t.Errorf("Dedup: %v", err)
					return
				}
				s.store(keys, nil, dup)
				// m<round> is new; m<round/2> repeats it (round 0) or a key
				// an earlier round stored.
				if dup[0] || !dup[1] {
					t.Errorf("%s round %d: dup = %v", acc, round, dup)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 100 {
			b.SetEnabled(i%2 == 0)
			clock.Advance(time.Minute)
		}
	})
	wg.Wait()
}
