package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wamux/wamux"
)

func benchReceipts(b *testing.B, n int) []Receipt {
	rs := make([]Receipt, n)
	for i := range rs {
		rs[i] = Receipt{MessageID: fmt.Sprintf("wamid.bench.%s.%08d", b.Name(), i), Type: wamux.ReceiptDelivered,
			EventTime: time.UnixMilli(1_764_000_000_000)}
	}
	return rs
}

// One caller, one fsync per Report: the floor of Report throughput.
func BenchmarkReport(b *testing.B) {
	g := newGateway(b)
	a := newTestAgent(b, g, b.TempDir(), nil)
	rs := benchReceipts(b, b.N)
	b.ResetTimer()
	for i := range b.N {
		if err := a.Report(context.Background(), rs[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	closeAgent(b, a)
}

// Many callers share fsyncs (group commit).
func BenchmarkReportParallel(b *testing.B) {
	g := newGateway(b)
	a := newTestAgent(b, g, b.TempDir(), nil)
	rs := benchReceipts(b, b.N)
	next := make(chan int, b.N)
	for i := range b.N {
		next <- i
	}
	close(next)
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := a.Report(context.Background(), rs[<-next]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	closeAgent(b, a)
}

// One caller handing over 200 receipts at a time.
func BenchmarkReportBatch(b *testing.B) {
	g := newGateway(b)
	a := newTestAgent(b, g, b.TempDir(), nil)
	rs := benchReceipts(b, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i += 200 {
		if err := a.ReportBatch(context.Background(), rs[i:min(i+200, b.N)]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	closeAgent(b, a)
}
