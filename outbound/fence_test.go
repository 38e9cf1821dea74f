package outbound_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/ownership"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
)

// fenceLog records the updates the store refused with store.ErrFenced.
type fenceLog struct {
	store.Store
	mu      sync.Mutex
	refused []store.MessageUpdate
}

func (s *fenceLog) UpdateMessage(ctx context.Context, u store.MessageUpdate) (bool, error) {
	ok, err := s.Store.UpdateMessage(ctx, u)
	if errors.Is(err, store.ErrFenced) {
		s.mu.Lock()
		s.refused = append(s.refused, u)
		s.mu.Unlock()
	}
	return ok, err
}

func (s *fenceLog) refusals() []store.MessageUpdate {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]store.MessageUpdate(nil), s.refused...)
}

// TestAccountTakenOverStopsSending: another node acquires the partition
// of an account this dispatcher sends for, and this one has not been told.
// Its next sending write is refused by the store's fence, the provider is
// not called for that message, and the account is not worked on any
// more; once this node acquires the partition again, the messages go out,
// each once.
func TestAccountTakenOverStopsSending(t *testing.T) {
	fl := &fenceLog{}
	var own *ownership.Cluster
	e := newEnv(t, envOpts{
		wrapStore: func(st store.Store) store.Store { fl.Store = st; return fl },
		ownership: func(st store.Store) ownership.Ownership {
			c, err := ownership.NewCluster(ownership.Config{Store: st, Node: "node-a", Partitions: 4})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			if err := c.Assign(context.Background(), []int{0, 1, 2, 3}); err != nil {
				t.Fatal(err)
			}
			own = c
			return c
		},
	})
	e.addAccount("acc", "9301", 100, 10, sim.Limits{Rate: 1000})
	m1 := textMsg(t, admit.Request{AccountID: "acc", To: "15559300001"})
	e.submit(m1)
	testwait.For(t, "the first message accepted", 10*time.Second, func() bool { return e.status(m1.ID) == wamux.StatusAccepted })
	lease, ok := own.Lease("acc")
	if !ok {
		t.Fatal("account not held")
	}
	revoked := make(chan ownership.Change, 1)
	stop := own.Watch(func(c ownership.Change) {
		if len(c.Revoked) > 0 {
			revoked <- c
		}
	})
	defer stop()

	other, err := e.store.AcquirePartition(context.Background(), lease.Partition, "node-b")
	if err != nil {
		t.Fatal(err)
	}
	m2 := textMsg(t, admit.Request{AccountID: "acc", To: "15559300002"})
	e.submit(m2)
	select {
	case c := <-revoked:
		if len(c.Revoked) != 1 || c.Revoked[0] != lease {
			t.Fatalf("revoked %+v, want %+v", c.Revoked, lease)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the dispatcher did not give the partition up")
	}
	refused := fl.refusals()
	if len(refused) != 1 || refused[0].MsgID != m2.ID || refused[0].Status != wamux.StatusSending || *refused[0].Fence != *lease.Fence() {
		t.Fatalf("refused updates %+v, want m2's sending write under %+v", refused, lease)
	}
	m3 := textMsg(t, admit.Request{AccountID: "acc", To: "15559300003"})
	e.submit(m3)
	if _, ok := own.Lease("acc"); ok {
		t.Fatal("account still held after the store refused its lease")
	}
	// A whole pass of the worker ran with m3 queued and launched nothing.
	e.d.Settle("acc")
	if n := e.d.AttemptsRunning("acc"); n != 0 {
		t.Fatalf("%d attempts running on an account not held", n)
	}
	if st := e.sim.Stats().Totals; st.Requests != 1 {
		t.Fatalf("provider saw %d requests, want 1: the fenced message was sent", st.Requests)
	}
	for _, id := range []string{m2.ID, m3.ID} {
		m, err := e.store.GetMessage(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if m.Status != wamux.StatusQueued || m.Attempts != 0 {
			t.Fatalf("message %s is %s after %d attempts, want queued and untried", id, m.Status, m.Attempts)
		}
	}

	if err := own.Assign(context.Background(), []int{lease.Partition}); err != nil {
		t.Fatal(err)
	}
	if l, _ := own.Lease("acc"); l.Epoch <= other {
		t.Fatalf("lease %+v after acquiring again, other node's epoch %d", l, other)
	}
	testwait.For(t, "both messages accepted", 10*time.Second, func() bool {
		return e.status(m2.ID) == wamux.StatusAccepted && e.status(m3.ID) == wamux.StatusAccepted
	})
	if st := e.sim.Stats().Totals; st.Requests != 3 || st.Duplicates != 0 {
		t.Fatalf("provider saw %d requests, %d duplicates; want 3 and 0", st.Requests, st.Duplicates)
	}
	if n := len(fl.refusals()); n != 1 {
		t.Fatalf("%d refused writes, want 1", n)
	}
}
