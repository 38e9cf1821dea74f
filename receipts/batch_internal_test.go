package receipts

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store/sqlite"
)

func TestBatchMinFollowsTheLoad(t *testing.T) {
	for _, tc := range []struct {
		name      string
		min, busy int
		load      float64
		want      int
	}{
		{"idle", 50, 1024, 0, 50},
		{"the appender's share", 50, 1024, appendBusyShare, 50},
		{"just below the share", 50, 1024, batchBusyShare - 0.01, 50},
		{"busy", 50, 1024, batchBusyShare, 1024},
		{"saturated", 50, 1024, 1, 1024},
		{"no busy size", 50, 50, 1, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Pipeline{cfg: Config{BatchMin: tc.min, BatchMinBusy: tc.busy}, busy: func() float64 { return tc.load }}
			if got := p.batchMin(); got != tc.want {
				t.Fatalf("batchMin() = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestBatchMinBusyDefaults(t *testing.T) {
	for _, tc := range []struct {
		name           string
		cfg            Config
		wantMin, wantB int
	}{
		{"defaults", Config{}, BatchMinDefault, BatchMinBusyDefault},
		{"BatchMin chosen: no change under load", Config{BatchMin: 10}, 10, 10},
		{"both chosen", Config{BatchMin: 10, BatchMinBusy: 300}, 10, 300},
		{"capped at BatchMax", Config{BatchMax: 500}, BatchMinDefault, 500},
		{"never below BatchMin", Config{BatchMin: 100, BatchMinBusy: 20}, 100, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Store, cfg.Registry = openStore(t), prometheus.NewRegistry()
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if p.cfg.BatchMin != tc.wantMin || p.cfg.BatchMinBusy != tc.wantB {
				t.Fatalf("BatchMin, BatchMinBusy = %d, %d; want %d, %d", p.cfg.BatchMin, p.cfg.BatchMinBusy, tc.wantMin, tc.wantB)
			}
		})
	}
}

// A busy pipeline holds receipts until BatchMinBusy of them wait, and an
// idle one processes them as BatchMin allows: the sizes of the batches the
// Observer sees tell which. BatchWait is an hour, so no timer decides.
func TestPartitionWaitsForLargerBatchesWhileBusy(t *testing.T) {
	const busyMin = 10
	for _, tc := range []struct {
		name  string
		load  float64
		first int // receipts in the first batch processed
	}{
		{"busy", 1, busyMin},
		{"idle", 0, busyMin - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batches := make(chan int, 16)
			p, err := New(Config{Store: openStore(t), Registry: prometheus.NewRegistry(), Partitions: 1,
				BatchMin: 1, BatchMinBusy: busyMin, BatchWait: time.Hour, AppendHold: -1,
				Observer: func(ps []Processed) { batches <- len(ps) }})
			if err != nil {
				t.Fatal(err)
			}
			p.busy = func() float64 { return tc.load }
			if err := p.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = p.Stop(ctx)
			})
			receipt := func(i int) []wamux.Receipt {
				return []wamux.Receipt{{MessageID: fmt.Sprintf("wamid.%d", i), AccountID: "acc1", Type: wamux.ReceiptDelivered,
					EventTime: time.Unix(1_700_000_000, 0)}}
			}
			// One call of busyMin-1 receipts: an idle partition processes
			// them at once, a busy one waits for more.
			var first []wamux.Receipt
			for i := range busyMin - 1 {
				first = append(first, receipt(i)...)
			}
			if _, err := p.Ingest(context.Background(), "agent", first); err != nil {
				t.Fatal(err)
			}
			if tc.load > 0 {
				if _, err := p.Ingest(context.Background(), "agent", receipt(busyMin)); err != nil {
					t.Fatal(err)
				}
			}
			if got := waitBatch(t, batches); got != tc.first {
				t.Fatalf("first batch = %d receipts, want %d", got, tc.first)
			}
		})
	}
}

func waitBatch(t *testing.T, batches <-chan int) int {
	t.Helper()
	select {
	case n := <-batches:
		return n
	case <-time.After(time.Minute):
		t.Fatal("no batch was processed")
		return 0
	}
}

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "wamux.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
