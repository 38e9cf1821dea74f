package outbound_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
)

// seqFailStore fails the next ApplySeq calls (the reorder buffer's step:
// statuses and the account's sequence state), as a store whose writes
// fail for a moment does. Nothing of a failed call is written.
type seqFailStore struct {
	store.Store
	left atomic.Int32
}

func (s *seqFailStore) wrap(st store.Store) store.Store { s.Store = st; return s }

func (s *seqFailStore) ApplySeq(ctx context.Context, st store.SeqState, updates []store.MessageUpdate) ([]bool, error) {
	if s.left.Add(-1) >= 0 {
		return nil, errors.New("seq fail store: write failed")
	}
	return s.Store.ApplySeq(ctx, st, updates)
}

// TestFailedSeqStepIsStoredLater: the write of the step that released seq
// 1 (its status queued, the account's next seq 2) failed once. Nothing
// wrote the step again: the stored next seq stayed 1, so after a restart
// seq 2 waited the whole gap_timeout (the frozen clock here never gets
// there) for a seq already sent, and then counted it as a skipped gap.
// The worker must write the step again, and send seq 1 once it has.
func TestFailedSeqStepIsStoredLater(t *testing.T) {
	clk := fakeclock.New()
	fs := &seqFailStore{}
	e := newEnv(t, envOpts{clock: clk, wrapStore: fs.wrap})
	e.addAccount("acc", "9601", 100, 100, sim.Limits{Rate: 1000})
	m := func(seq int64) wamux.Message {
		return textMsg(t, admit.Request{AccountID: "acc", ClientSeq: seqp(seq), To: "15559600001"})
	}
	ctx := context.Background()
	fs.left.Store(1)
	e.submit(m(1))
	testwait.For(t, "the failed sequencing step stored again", 10*time.Second, func() bool {
		// Past the worker's wait before it tries again, however late
		// the failure came.
		clk.Advance(2 * time.Second)
		e.d.Kick()
		st, err := e.store.GetSeq(ctx, "acc")
		return err == nil && st.NextSeq == 2
	})
	e.waitAccepted(1, 10*time.Second)

	e.stop()
	e.start()
	e.submit(m(2))
	e.waitAccepted(2, 10*time.Second)
	if got := gaps(t, e); got != 0 {
		t.Fatalf("gaps skipped = %v, want 0: seq 1 was sent", got)
	}
}
