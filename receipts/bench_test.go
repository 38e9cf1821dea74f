package receipts

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/store"
)

func BenchmarkMerge(b *testing.B) {
	cur := state(wamux.ReceiptFailed, 20, 131026, t0)
	for _, bc := range []struct {
		name string
		r    wamux.Receipt
		now  time.Time
	}{
		{"apply", rcpt(wamux.ReceiptRead, 30, 0), t0},
		{"ignore", rcpt(wamux.ReceiptFailed, 20, 131026), t0},
		{"late", rcpt(wamux.ReceiptDelivered, 10, 0), t0.Add(time.Hour)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Merge(cur, bc.r, bc.now, 5*time.Minute)
			}
		})
	}
}

func BenchmarkLRUSeen(b *testing.B) {
	l, err := NewLRU(LRUConfig{})
	if err != nil {
		b.Fatal(err)
	}
	accounts, msgs := benchStrings("acc", 100), benchStrings("wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAz", 10000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l.Seen(accounts[i%len(accounts)], ReceiptID{MessageID: msgs[i%len(msgs)], Type: wamux.ReceiptDelivered})
		i++
	}
}

// setConfirmer knows a fixed set of stored keys, so a long benchmark does
// not grow a store.
type setConfirmer map[store.ReceiptKey]bool

func (s setConfirmer) HasReceipts(_ context.Context, keys []store.ReceiptKey) ([]bool, error) {
	out := make([]bool, len(keys))
	for i, k := range keys {
		out[i] = s[k]
	}
	return out, nil
}

// HasCallbackReceipts: the set's receipts all carry callback data.
func (s setConfirmer) HasCallbackReceipts(ctx context.Context, keys []store.ReceiptKey) ([]bool, error) {
	return s.HasReceipts(ctx, keys)
}

// BenchmarkDedup runs batches of 100 keys, 90 new and 10 stored, at the
// default filter size, with every hour of the window filled to its design
// load first (the steady state; an empty window is much cheaper to miss in),
// moving the clock an hour per ExpectedPerHour keys. Receipts carrying
// callback data (a webhook's) ask the filter under one key, those without
// (an agent's) under two.
func BenchmarkDedup(b *testing.B) {
	for _, c := range []struct{ on, callback bool }{{true, true}, {true, false}, {false, true}} {
		on := c.on
		b.Run(fmt.Sprint("bloom=", on, "/callback=", c.callback), func(b *testing.B) {
			clock := fakeclock.NewAt(t0)
			bl := newTestBloom(b, BloomConfig{Now: clock.Now, Disabled: !on})
			fillWindow(bl, hourOf(t0))
			accounts := benchStrings("acc", 1000)
			msgs := benchStrings("wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAz", 100_000)
			stored := setConfirmer{}
			var old []store.ReceiptKey
			for i := range 1000 {
				k := rkey("stored", msgs[i], wamux.ReceiptRead)
				stored[k] = true
				old = append(old, k)
			}
			const batch, fresh = 100, 90
			var callback []bool
			if c.callback {
				callback = make([]bool, batch)
				for i := range callback {
					callback[i] = true
				}
			}
			ctx := context.Background()
			// Adds old under the keys the benchmark asks about.
			for i := 0; i < len(old); i += batch {
				if _, _, err := bl.Dedup(ctx, old[i:i+batch], callback, setConfirmer{}); err != nil {
					b.Fatal(err)
				}
			}
			keys := make([]store.ReceiptKey, batch)
			n := 0
			var hits, fps int
			b.ReportAllocs()
			for b.Loop() {
				for j := range fresh {
					keys[j] = rkey(accounts[(n/len(msgs))%len(accounts)], msgs[n%len(msgs)], wamux.ReceiptDelivered)
					n++
					if n%BloomExpectedPerHourDefault == 0 {
						clock.Advance(time.Hour)
					}
				}
				for j := fresh; j < batch; j++ {
					keys[j] = old[(n+j)%len(old)]
				}
				_, st, err := bl.Dedup(ctx, keys, callback, stored)
				if err != nil {
					b.Fatal(err)
				}
				hits += st.Hits
				fps += st.FalsePositives
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/key")
			if on {
				b.ReportMetric(float64(fps)/float64(b.N*fresh), "fp/new-key")
			}
		})
	}
}

// BenchmarkBloomMayContain asks a full window about keys it never saw, the
// common case and the costly one: every hour's filter is probed.
func BenchmarkBloomMayContain(b *testing.B) {
	bl := newTestBloom(b, BloomConfig{})
	fillWindow(bl, hourOf(t0))
	msgs := benchStrings("wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAz", 10000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		bl.MayContain(rkey("acc", msgs[i%len(msgs)], wamux.ReceiptSent), t0)
		i++
	}
}

// fillWindow gives the 47 hours before hour h a filter with half its bits
// set at random, about what ExpectedPerHour keys leave behind, and hour h
// an empty one for the benchmark to fill.
func fillWindow(bl *Bloom, h int64) {
	rng := rand.New(rand.NewPCG(1, 2))
	past := uint64(1<<BloomHours-1) &^ (1 << slot(h))
	bl.words = make([]uint64, bl.m)
	for i := range bl.words {
		bl.words[i] = rng.Uint64() & past
	}
	for i := range BloomHours {
		hour := h - int64(i)
		bl.hours[slot(hour)] = hour
	}
	bl.used = 1<<BloomHours - 1
}

// BenchmarkBloomRotate is the pause an Add takes when it reuses the slot of
// an hour 48 h older, at the default size: once an hour.
func BenchmarkBloomRotate(b *testing.B) {
	bl := newTestBloom(b, BloomConfig{})
	fillWindow(bl, hourOf(t0))
	k := rkey("acc", "m", wamux.ReceiptSent)
	at := t0
	for b.Loop() {
		at = at.Add(BloomHours * time.Hour)
		bl.Add(k, at)
	}
}

func benchStrings(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%08d", prefix, i)
	}
	return out
}
