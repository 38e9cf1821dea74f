package receipts_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/store"
)

var types = []wamux.ReceiptType{wamux.ReceiptSent, wamux.ReceiptFailed, wamux.ReceiptDelivered, wamux.ReceiptRead}

// TestPipelineConverges: for random receipts of random messages, any
// permutation with random duplication, fed in random chunks by concurrent
// callers through the real pipeline and a real SQLite store, ends in the
// state the merge rule defines for every message, and loses no receipt.
// Small LRU, batch and queue sizes and a sometimes tiny Bloom filter make
// every dedup layer and the read-back from the log take part.
func TestPipelineConverges(t *testing.T) {
	// One store for all runs, which keep apart by account: opening and
	// migrating a database per run would dominate the test's time.
	st := openSQLite(t)
	run := 0
	var readBack int64
	rapid.Check(t, func(rt *rapid.T) {
		run++
		nMsgs := rapid.IntRange(1, 8).Draw(rt, "messages")
		var uniq []wamux.Receipt
		seen := map[store.ReceiptKey]bool{}
		for range rapid.IntRange(1, 30).Draw(rt, "receipts") {
			r := wamux.Receipt{
				AccountID: fmt.Sprintf("run%d-acc%d", run, rapid.IntRange(0, 2).Draw(rt, "account")),
				MessageID: fmt.Sprintf("wamid.%d", rapid.IntRange(0, nMsgs-1).Draw(rt, "message")),
				Type:      rapid.SampledFrom(types).Draw(rt, "type"),
				EventTime: base.Add(time.Duration(rapid.IntRange(0, 5).Draw(rt, "sec")) * time.Second),
			}
			if r.Type == wamux.ReceiptFailed {
				r.ErrorCode = rapid.SampledFrom([]int{131049, 131026, 131000}).Draw(rt, "code")
			}
			k := store.ReceiptKey{MessageID: r.MessageID, AccountID: r.AccountID, Type: r.Type}
			if seen[k] { // one receipt per triple: a repeat is a duplicate
				continue
			}
			seen[k] = true
			uniq = append(uniq, r)
		}
		stream := append([]wamux.Receipt(nil), uniq...)
		for range rapid.IntRange(0, 20).Draw(rt, "duplicates") {
			stream = append(stream, uniq[rapid.IntRange(0, len(uniq)-1).Draw(rt, "dup")])
		}
		perm := rapid.Permutation(stream).Draw(rt, "order")

		bloom := receipts.BloomConfig{}
		if rapid.Bool().Draw(rt, "tiny bloom") {
			bloom = receipts.BloomConfig{ExpectedPerHour: 1, FalsePositiveRate: 0.5}
		}
		p := startPipeline(t, receipts.Config{
			Store:    st,
			LRU:      receipts.LRUConfig{PerAccount: rapid.IntRange(1, 8).Draw(rt, "lru")},
			Bloom:    bloom,
			BatchMin: rapid.IntRange(1, 20).Draw(rt, "batch min"),
			BatchMax: rapid.IntRange(1, 30).Draw(rt, "batch max"),
			// A small queue that spills after a millisecond makes the
			// processors read receipts back from the durable log.
			QueueCap:   rapid.IntRange(1, 64).Draw(rt, "queue cap"),
			SpillAfter: time.Millisecond,
		})
		chunks := splitRandom(rt, perm)
		var wg sync.WaitGroup
		errs := make(chan error, len(chunks))
		for _, c := range chunks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := p.Ingest(context.Background(), "agent", c); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			rt.Fatalf("ingest: %v", err)
		}
		flush(t, p)
		if err := p.Stop(context.Background()); err != nil {
			rt.Fatalf("stop: %v", err)
		}
		checkStored(t, st, uniq)
		checkStates(t, st, expected(uniq))
		s := p.Stats()
		if s.Applied > int64(len(uniq)) {
			rt.Fatalf("applied %d receipts, only %d are distinct", s.Applied, len(uniq))
		}
		readBack += s.ReadBack
	})
	if readBack == 0 {
		t.Fatal("no run read receipts back from the log; the spill path went untested")
	}
}

func splitRandom(rt *rapid.T, rs []wamux.Receipt) [][]wamux.Receipt {
	var out [][]wamux.Receipt
	for len(rs) > 0 {
		n := rapid.IntRange(1, len(rs)).Draw(rt, "chunk")
		out = append(out, rs[:n])
		rs = rs[n:]
	}
	return out
}
