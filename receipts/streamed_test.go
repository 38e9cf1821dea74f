package receipts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/stream"
	"github.com/wamux/wamux/stream/kafka"
	"github.com/wamux/wamux/stream/local"
)

func openLocalStream(t testing.TB, path string) stream.Log {
	t.Helper()
	l, err := local.Open(context.Background(), path, local.Config{Partitions: 4})
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	return l
}

// manyReceipts makes receipts over several accounts and messages, with
// repeats of some.
func manyReceipts(accounts, messages, from int) []wamux.Receipt {
	var rs []wamux.Receipt
	for a := range accounts {
		for m := range messages {
			acc, msg := fmt.Sprintf("acc%d", a), fmt.Sprintf("w%d.%d", a, from+m)
			rs = append(rs, rcpt(acc, msg, wamux.ReceiptSent, m), rcpt(acc, msg, wamux.ReceiptDelivered, m+1))
		}
	}
	return rs
}

// statesReach waits until the store holds the merged state of rs.
func statesReach(t testing.TB, st store.Store, rs []wamux.Receipt) {
	t.Helper()
	want := expected(rs)
	keys := make([]store.StateKey, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	testwait.ForNil(t, 20*time.Second, func() error {
		got, err := st.GetStates(context.Background(), keys)
		if err != nil {
			return err
		}
		for k, w := range want {
			if g, ok := got[k]; !ok || g.Type != w.Type {
				return fmt.Errorf("state of %v is %q, want %q", k, g.Type, w.Type)
			}
		}
		return nil
	})
}

// In stream mode Ingest appends to the stream and the pipeline merges
// what the stream delivers: the same states as from the store's log.
func TestStreamModeMergesWhatIngestAppended(t *testing.T) {
	st := openSQLite(t)
	l := openLocalStream(t, filepath.Join(t.TempDir(), "stream.db"))
	defer l.Close()
	p := startPipeline(t, receipts.Config{Store: st, Stream: l})
	rs := manyReceipts(6, 20, 0)
	ingest(t, p, rs...)
	ingest(t, p, rs[:10]...) // repeats
	flush(t, p)
	checkStored(t, st, rs)
	checkStates(t, st, expected(rs))
	if s := p.Stats(); s.Applied != int64(len(rs)) {
		t.Errorf("applied %d, want %d (each new receipt once)", s.Applied, len(rs))
	}
}

// Records a crash left in the stream, some of them stored (L3) but never
// merged, are merged when the next run's consumer gets their partitions.
func TestStreamModeMergesWhatACrashLeftStoredButUnmerged(t *testing.T) {
	st := openSQLite(t)
	l := openLocalStream(t, filepath.Join(t.TempDir(), "stream.db"))
	defer l.Close()
	rs := manyReceipts(4, 10, 0)
	recs := make([]stream.Record, len(rs))
	for i, r := range rs {
		r.Source, r.ReceivedAt = "agent", base
		v, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = stream.Record{Key: r.AccountID, Value: v}
	}
	if err := l.Append(context.Background(), recs); err != nil {
		t.Fatalf("append: %v", err)
	}
	if _, err := st.InsertReceipts(context.Background(), rs[:len(rs)/2]); err != nil {
		t.Fatalf("insert receipts: %v", err)
	}
	startPipeline(t, receipts.Config{Store: st, Stream: l})
	statesReach(t, st, rs)
}

// Two nodes, each with its own Kafka clients on one kfake cluster and one
// store, ingest and process receipts together; when one stops, the other
// takes its partitions over and nothing ingested is lost.
func TestStreamModeTwoNodesOnKafka(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	defer c.Close()
	cfg := kafka.Config{
		Brokers: c.ListenAddrs(), Topic: "receipts", Group: "wamux", Partitions: 4,
		ReplicationFactor: 3, HeartbeatInterval: 50 * time.Millisecond,
	}
	openKafka := func() *kafka.Log {
		l, err := kafka.Open(context.Background(), cfg)
		if err != nil {
			t.Fatalf("open kafka stream: %v", err)
		}
		return l
	}
	la, lb := openKafka(), openKafka()
	defer la.Close()
	defer lb.Close()

	st := openSQLite(t)
	a := startPipeline(t, receipts.Config{Store: st, Stream: la})
	b := startPipeline(t, receipts.Config{Store: st, Stream: lb})
	first := manyReceipts(8, 10, 0)
	ingest(t, a, first[:len(first)/2]...)
	ingest(t, b, first[len(first)/2:]...)
	statesReach(t, st, first)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Stop(ctx); err != nil {
		t.Fatalf("stop b: %v", err)
	}
	second := manyReceipts(8, 10, 100)
	ingest(t, a, second...)
	statesReach(t, st, append(first, second...))
	checkStored(t, st, append(first, second...))
}
