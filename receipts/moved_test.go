package receipts_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/stream"
	"github.com/wamux/wamux/stream/kafka"
)

// gatedStore holds the first InsertReceipts call (a batch being merged)
// until open is closed.
type gatedStore struct {
	store.Store
	once    sync.Once
	entered chan struct{}
	open    chan struct{}
}

func (g *gatedStore) InsertReceipts(ctx context.Context, rs []wamux.Receipt) ([]bool, error) {
	first := false
	g.once.Do(func() { first = true; close(g.entered) })
	if first {
		select {
		case <-g.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Store.InsertReceipts(ctx, rs)
}

// assignLog records, per partition, when a member of this log was last
// assigned it.
type assignLog struct {
	stream.Log
	mu       sync.Mutex
	assigned map[int32]time.Time
}

func (l *assignLog) Consume(ctx context.Context, h stream.Handler) error {
	return l.Log.Consume(ctx, &assignHandler{Handler: h, l: l})
}

func (l *assignLog) holds(p int32) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.assigned[p]
	return at, ok
}

type assignHandler struct {
	stream.Handler
	l *assignLog
}

func (h *assignHandler) Assigned(ctx context.Context, ps []int32) {
	h.l.mu.Lock()
	for _, p := range ps {
		h.l.assigned[p] = time.Now()
	}
	h.l.mu.Unlock()
	h.Handler.Assigned(ctx, ps)
}

func (h *assignHandler) Revoked(ctx context.Context, ps []int32) {
	h.l.mu.Lock()
	for _, p := range ps {
		delete(h.l.assigned, p)
	}
	h.l.mu.Unlock()
	h.Handler.Revoked(ctx, ps)
}

// TestStreamModePartitionMovedDuringABatch: node a holds every partition
// and is in the middle of merging a batch (its store write held) when node
// b joins and the group moves partitions to b. The move waits for a's
// batch: b is given no partition before the held write is let through.
// Then every receipt ingested before, during and after the move is stored
// once and merged, whichever node merged it.
func TestStreamModePartitionMovedDuringABatch(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	defer c.Close()
	cfg := kafka.Config{
		Brokers: c.ListenAddrs(), Topic: "receipts", Group: "wamux", Partitions: 4,
		ReplicationFactor: 3, HeartbeatInterval: 50 * time.Millisecond,
	}
	open := func() *assignLog {
		l, err := kafka.Open(context.Background(), cfg)
		if err != nil {
			t.Fatalf("open kafka stream: %v", err)
		}
		t.Cleanup(func() { l.Close() })
		return &assignLog{Log: l, assigned: map[int32]time.Time{}}
	}
	st := openSQLite(t)
	gate := &gatedStore{Store: st, entered: make(chan struct{}), open: make(chan struct{})}
	la, lb := open(), open()
	a := startPipeline(t, receipts.Config{Store: gate, Stream: la})
	testwait.For(t, "a to hold every partition", 20*time.Second, func() bool {
		for p := range int32(4) {
			if _, ok := la.holds(p); !ok {
				return false
			}
		}
		return true
	})
	first := manyReceipts(8, 10, 0)
	ingest(t, a, first...)
	select {
	case <-gate.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("a merged no batch")
	}

	// b joins while a's batch is held. The group tells a of the
	// rebalance in the answer to a heartbeat; a may rejoin, and so let
	// the group move partitions to b, only once its batch returned.
	var mu sync.Mutex
	var aMember string
	bJoined := false
	told := make(chan struct{})
	c.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		if r := req.(*kmsg.JoinGroupRequest); r.MemberID == "" || r.MemberID != aMember {
			bJoined = true
		}
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		r := req.(*kmsg.HeartbeatRequest)
		if !bJoined {
			aMember = r.MemberID // only a is in the group yet
		} else if r.MemberID == aMember && told != nil {
			close(told)
			told = nil
		}
		return nil, nil, false
	})
	mu.Lock()
	signal := told
	mu.Unlock()
	testwait.For(t, "a's heartbeat", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return aMember != ""
	})
	b := startPipeline(t, receipts.Config{Store: st, Stream: lb})
	second := manyReceipts(8, 10, 100)
	ingest(t, b, second...)
	select {
	case <-signal:
	case <-time.After(20 * time.Second):
		t.Fatal("a was not told of the rebalance b's join started")
	}
	for p := range int32(4) {
		if _, ok := lb.holds(p); ok {
			t.Fatalf("b was given partition %d while a's batch was still being merged", p)
		}
	}
	released := time.Now()
	close(gate.open)
	testwait.For(t, "b to be given partitions", 20*time.Second, func() bool {
		for p := range int32(4) {
			if at, ok := lb.holds(p); ok && at.After(released) {
				return true
			}
		}
		return false
	})
	third := manyReceipts(8, 10, 200)
	ingest(t, a, third[:len(third)/2]...)
	ingest(t, b, third[len(third)/2:]...)
	all := append(append(first, second...), third...)
	statesReach(t, st, all)
	checkStored(t, st, all)
}
