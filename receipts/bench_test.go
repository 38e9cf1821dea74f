package receipts

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/bits-and-blooms/bloom/v3"

	"github.com/wamux/wamux"
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

// BenchmarkDedup runs batches of 100 keys, 90 new and 10 stored, at the
// default filter size, with every hour of the window filled to its design
// load first (the steady state; an empty window is much cheaper to miss in),
// moving the clock an hour per ExpectedPerHour keys.
func BenchmarkDedup(b *testing.B) {
	for _, on := range []bool{true, false} {
		b.Run(fmt.Sprint("bloom=", on), func(b *testing.B) {
			clock := newFakeClock(t0)
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
				bl.Add(k, t0)
			}
			const batch, fresh = 100, 90
			keys := make([]store.ReceiptKey, batch)
			ctx := context.Background()
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
				_, st, err := bl.Dedup(ctx, keys, stored)
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

// fillWindow gives every hour of the window ending at hour h a filter with
// half its bits set at random: what ExpectedPerHour keys leave behind.
func fillWindow(bl *Bloom, h int64) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range BloomHours {
		words := make([]uint64, (bl.m+63)/64)
		for w := range words {
			words[w] = rng.Uint64()
		}
		hour := h - int64(i)
		bl.buckets[slot(hour)] = bucket{hour: hour, f: bloom.FromWithM(words, bl.m, bl.k)}
	}
}

func benchStrings(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%08d", prefix, i)
	}
	return out
}
