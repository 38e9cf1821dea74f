package receipts_test

import (
	"context"
	"fmt"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/store"
)

func ExampleMerge() {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	failed := wamux.Receipt{AccountID: "acc", MessageID: "wamid.1", Type: wamux.ReceiptFailed, EventTime: at.Add(time.Second), ErrorCode: 131026}
	delivered := wamux.Receipt{AccountID: "acc", MessageID: "wamid.1", Type: wamux.ReceiptDelivered, EventTime: at}

	// The failure is merged first; the delivery, though earlier, proves
	// arrival and wins while it comes within the late window.
	s, d := receipts.Merge(nil, failed, at.Add(2*time.Second), 5*time.Minute)
	fmt.Println(d, s.Type)
	s, d = receipts.Merge(&s, delivered, at.Add(time.Minute), 5*time.Minute)
	fmt.Println(d, s.Type)
	_, d = receipts.Merge(&s, failed, at.Add(2*time.Minute), 5*time.Minute)
	fmt.Println(d, s.Type)
	// Output:
	// apply failed
	// apply delivered
	// ignore delivered
}

// stored is a confirmer that knows one stored receipt.
type stored map[store.ReceiptKey]bool

func (s stored) HasReceipts(_ context.Context, keys []store.ReceiptKey) ([]bool, error) {
	out := make([]bool, len(keys))
	for i, k := range keys {
		out[i] = s[k]
	}
	return out, nil
}

// HasCallbackReceipts: the stored receipt carries no callback data.
func (s stored) HasCallbackReceipts(_ context.Context, keys []store.ReceiptKey) ([]bool, error) {
	return make([]bool, len(keys)), nil
}

func ExampleBloom_Dedup() {
	bl, err := receipts.NewBloom(receipts.BloomConfig{})
	if err != nil {
		panic(err)
	}
	old := store.ReceiptKey{AccountID: "acc", MessageID: "wamid.1", Type: wamux.ReceiptRead}
	bl.Add(old, time.Now())
	fresh := store.ReceiptKey{AccountID: "acc", MessageID: "wamid.2", Type: wamux.ReceiptRead}

	dup, st, err := bl.Dedup(context.Background(), []store.ReceiptKey{old, fresh, fresh}, nil, stored{old: true})
	if err != nil {
		panic(err)
	}
	fmt.Println(dup)
	fmt.Printf("hits %d, confirmed %d, repeats %d\n", st.Hits, st.Confirmed, st.Repeats)
	// Output:
	// [true false true]
	// hits 1, confirmed 1, repeats 1
}

func ExampleLRU_Seen() {
	l, err := receipts.NewLRU(receipts.LRUConfig{})
	if err != nil {
		panic(err)
	}
	id := receipts.ReceiptID{MessageID: "wamid.1", Type: wamux.ReceiptDelivered}
	fmt.Println(l.Seen("acc", id), l.Seen("acc", id), l.Seen("other", id))
	// Output: false true false
}
