package storetest

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// NewBenchStore returns a fresh, empty store for one benchmark and closes
// it in b.Cleanup.
type NewBenchStore func(b *testing.B) store.Store

// Bench runs the store benchmarks: messages and receipts, one row per call
// from one caller, one row per call from many concurrent callers (where
// group commit pays off), and batched. Each reports rows/s and rows/cpu-s.
func Bench(b *testing.B, newStore NewBenchStore) {
	b.Run("Messages/single", func(b *testing.B) { benchMessages(b, newStore(b), 1, 1) })
	b.Run("Messages/single-64callers", func(b *testing.B) { benchMessages(b, newStore(b), 1, 64) })
	b.Run("Messages/batch100", func(b *testing.B) { benchMessages(b, newStore(b), 100, 1) })
	b.Run("Receipts/single", func(b *testing.B) { benchReceipts(b, newStore(b), 1, 1) })
	b.Run("Receipts/single-64callers", func(b *testing.B) { benchReceipts(b, newStore(b), 1, 64) })
	b.Run("Receipts/batch1000", func(b *testing.B) { benchReceipts(b, newStore(b), 1000, 1) })
	b.Run("Receipts/batch1000-4callers", func(b *testing.B) { benchReceipts(b, newStore(b), 1000, 4) })
	b.Run("Receipts/batch1000-randomids", func(b *testing.B) { benchReceipts(b, newStore(b), 1000, 1, randomIDs) })
}

// runCalls makes b.N calls of call(prepare(i)) from callers goroutines and
// reports rows/s and rows/cpu-s. With one caller, prepare (building the
// test data) runs with the timer stopped and its CPU is not counted, so the
// figures are the store's alone; with many callers it cannot be separated
// and is included.
//
// rows/cpu-s counts all CPU of the test process: callers, writer, driver
// and, for SQLite, the database engine. PostgreSQL's server processes are
// not counted. On a shared machine it is the steadier of the two figures.
func runCalls[T any](b *testing.B, callers, rowsPerCall int, prepare func(i int) T, call func(T) error) {
	var excluded time.Duration
	b.ResetTimer()
	cpu0 := cpuTime()
	if callers <= 1 {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			c := cpuTime()
			data := prepare(i)
			excluded += cpuTime() - c
			b.StartTimer()
			if err := call(data); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		var next atomic.Int64
		b.SetParallelism(max(1, callers/max(1, runtimeProcs())))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := call(prepare(int(next.Add(1)))); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	cpu := cpuTime() - cpu0 - excluded
	b.StopTimer()
	rows := float64(b.N * rowsPerCall)
	b.ReportMetric(rows/b.Elapsed().Seconds(), "rows/s")
	if cpu > 0 {
		b.ReportMetric(rows/cpu.Seconds(), "rows/cpu-s")
	}
}

func benchMessages(b *testing.B, s store.Store, batch, callers int) {
	ctx := context.Background()
	tmpl := testMessage("m", "acc1", 0, "h")
	prefix := "bench-" + strconv.Itoa(batch) + "-"
	runCalls(b, callers, batch, func(i int) []wamux.Message {
		msgs := make([]wamux.Message, batch)
		base := i * batch
		for j := range msgs {
			msgs[j] = tmpl
			msgs[j].ID = prefix + strconv.Itoa(base+j)
			msgs[j].To = "+4917" + strconv.Itoa((base+j)%100000)
		}
		return msgs
	}, func(msgs []wamux.Message) error {
		res, err := s.InsertMessages(ctx, msgs)
		if err != nil {
			return err
		}
		if res[0].Outcome != store.Inserted {
			b.Errorf("message %s: %v", msgs[0].ID, res[0].Outcome)
		}
		return nil
	})
}

// receiptID makes the n-th message id of a benchmark. The default ids
// share a prefix and count up, so each batch lands in a narrow range of
// the key space; randomIDs scatters them the way real wamids are
// scattered, so every row of a batch dirties a different index page once
// the table outgrows the batch.
type receiptID func(n int) string

func countingIDs(n int) string { return "wamid.HBgL" + strconv.Itoa(n) }

func randomIDs(n int) string {
	return "wamid.HBgL" + strconv.FormatUint(uint64(n)*0x9E3779B97F4A7C15, 36)
}

func benchReceipts(b *testing.B, s store.Store, batch, callers int, ids ...receiptID) {
	id := receiptID(countingIDs)
	if len(ids) > 0 {
		id = ids[0]
	}
	ctx := context.Background()
	tmpl := testReceipt("w", "acc1", wamux.ReceiptDelivered)
	types := []wamux.ReceiptType{wamux.ReceiptSent, wamux.ReceiptDelivered, wamux.ReceiptRead}
	runCalls(b, callers, batch, func(i int) []wamux.Receipt {
		// What a webhook batch of one account looks like: message ids,
		// callback data, recipients, types and event times differ per row;
		// account, source and receive time are shared.
		rs := make([]wamux.Receipt, batch)
		base := i * batch
		for j := range rs {
			n := base + j
			rs[j] = tmpl
			rs[j].MessageID = id(n)
			rs[j].CallbackData = strconv.Itoa(n)
			rs[j].Recipient = "+4917" + strconv.Itoa(n%100000)
			rs[j].Type = types[n%len(types)]
			rs[j].EventTime = receiptBase.Add(time.Duration(n) * time.Millisecond)
		}
		return rs
	}, func(rs []wamux.Receipt) error {
		news, err := s.InsertReceipts(ctx, rs)
		if err != nil {
			return err
		}
		if !news[0] {
			b.Errorf("receipt %s not new", rs[0].MessageID)
		}
		return nil
	})
}
