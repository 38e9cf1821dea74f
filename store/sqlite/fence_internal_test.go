package sqlite

import (
	"context"
	"errors"
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// TestFencedUpdateInSharedBatch queues a stale fenced update between two
// current ones into one group commit, as one-statement requests (no
// savepoints): the stale one is refused with ErrFenced, the batch
// commits, and its neighbours land.
func TestFencedUpdateInSharedBatch(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	msgs := []wamux.Message{
		{ID: "a", AccountID: "acc1", To: "+1", Type: "text", ContentHash: "h", Status: wamux.StatusQueued},
		{ID: "b", AccountID: "acc1", To: "+2", Type: "text", ContentHash: "h", Status: wamux.StatusQueued},
		{ID: "c", AccountID: "acc1", To: "+3", Type: "text", ContentHash: "h", Status: wamux.StatusQueued},
	}
	if _, err := s.InsertMessages(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	old, err := s.AcquirePartition(ctx, 0, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := s.AcquirePartition(ctx, 0, "node-b")
	if err != nil {
		t.Fatal(err)
	}
	toSending := func(id string, epoch int64) *request {
		r := &request{ctx: context.Background(), done: make(chan error, 1), oneStatement: true, fn: func(w *writeTx) error {
			_, err := updateMessageTx(w, store.MessageUpdate{MsgID: id, Status: wamux.StatusSending, AttemptsDelta: 1,
				Fence: &store.Fence{Partition: 0, Epoch: epoch}}, 1)
			return err
		}}
		s.reqs <- r
		return r
	}
	release, blockerDone := blockWriter(t, s)
	ra, rb, rc := toSending("a", cur), toSending("b", old), toSending("c", cur)
	release()
	if err := <-blockerDone; err != nil {
		t.Fatalf("blocker: %v", err)
	}
	if err := <-rb.done; !errors.Is(err, store.ErrFenced) {
		t.Fatalf("stale update: %v, want ErrFenced", err)
	}
	for _, r := range []*request{ra, rc} {
		if err := <-r.done; err != nil {
			t.Fatalf("current update: %v", err)
		}
	}
	for id, want := range map[string]wamux.Status{"a": wamux.StatusSending, "b": wamux.StatusQueued, "c": wamux.StatusSending} {
		m, err := s.GetMessage(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if m.Status != want {
			t.Fatalf("%s is %s, want %s", id, m.Status, want)
		}
	}
}
