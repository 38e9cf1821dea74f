package receipts

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/sqlite"
	"github.com/wamux/wamux/stream"
	"github.com/wamux/wamux/stream/local"
)

// A holder that stored a batch (L3) and died before merging it leaves the
// batch uncommitted in the stream. The next holder finds those receipts in
// L2 (the filter shared across nodes remembers them) and L3, and must
// merge them all the same.
func TestStreamModeRemergesWhatTheLastHolderStoredButDidNotMerge(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "wamux.db"), sqlite.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	defer st.Close()
	l, err := local.Open(ctx, filepath.Join(dir, "stream.db"), local.Config{Partitions: 4})
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	defer l.Close()

	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	var rs []wamux.Receipt
	var recs []stream.Record
	for i := range 40 {
		r := wamux.Receipt{AccountID: fmt.Sprintf("acc%d", i%5), MessageID: fmt.Sprintf("w%d", i),
			Type: wamux.ReceiptDelivered, EventTime: at.Add(time.Duration(i) * time.Second), Source: "agent", ReceivedAt: at}
		v, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
		recs = append(recs, stream.Record{Key: r.AccountID, Value: v})
	}
	if err := l.Append(ctx, recs); err != nil {
		t.Fatalf("append: %v", err)
	}
	stored := rs[:len(rs)/2]
	if _, err := st.InsertReceipts(ctx, stored); err != nil {
		t.Fatalf("insert receipts: %v", err)
	}

	shared, err := NewBloom(BloomConfig{})
	if err != nil {
		t.Fatalf("new bloom: %v", err)
	}
	for _, r := range stored {
		shared.Add(keyOf(r), time.Now())
	}
	p, err := New(Config{Store: st, Registry: prometheus.NewRegistry(), Stream: l, BloomFilter: shared, BatchMax: 8})
	if err != nil {
		t.Fatalf("new pipeline: %v", err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	keys := make([]store.StateKey, len(rs))
	for i, r := range rs {
		keys[i] = store.StateKey{AccountID: r.AccountID, MessageID: r.MessageID}
	}
	testwait.ForNil(t, 20*time.Second, func() error {
		got, err := st.GetStates(ctx, keys)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if got[k].Type != wamux.ReceiptDelivered {
				return fmt.Errorf("no merged state for %v", k)
			}
		}
		return nil
	})
}
