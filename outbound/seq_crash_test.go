package outbound_test

import (
	"context"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store/sqlite"
)

// reopen closes the SQLite store and opens the same file again, as a new
// process does; the dispatcher's wrapper fs is pointed at the new one.
func (e *env) reopen(fs *seqFailStore) {
	e.t.Helper()
	if err := e.store.Close(); err != nil {
		e.t.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), e.dbPath, sqlite.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { st.Close() })
	e.store = st
	e.dstore = fs.wrap(st)
}

// TestSeqStepFailingUntilCrash: every write of the reorder buffer's steps
// fails from the first message on, until the process dies (Stop's last
// try fails too). The next process starts on the same database with a
// working store. Seqs 1 and 2 (one recipient) and 3 (another) submitted
// before the crash, 4 (the first recipient) after it, must each reach
// the provider once, in seq order per recipient, and none may wait for
// the gap timeout: no seq is missing. The frozen clock never reaches the
// gap timeout, so a wait for it shows as a message never sent.
func TestSeqStepFailingUntilCrash(t *testing.T) {
	clk := fakeclock.New()
	fs := &seqFailStore{}
	e := newEnv(t, envOpts{clock: clk, wrapStore: fs.wrap})
	e.addAccount("acc", "9611", 100, 100, sim.Limits{Rate: 1000})
	const x, y = "15559610001", "15559610002"
	seqOf := map[string]int64{}
	m := func(seq int64, to string) wamux.Message {
		msg := textMsg(t, admit.Request{AccountID: "acc", ClientSeq: seqp(seq), To: to})
		seqOf[msg.ID] = seq
		return msg
	}
	fs.left.Store(1 << 30)
	e.submit(m(1, x), m(2, x), m(3, y))
	testwait.For(t, "the sequencing step failing", 10*time.Second, func() bool { return fs.left.Load() < 1<<30 })
	e.stop() // its last try of the step fails too: the crash

	fs.left.Store(0)
	e.reopen(fs)
	e.start()
	e.submit(m(4, x))
	testwait.For(t, "every message accepted", 10*time.Second, func() bool {
		e.d.Kick()
		for id := range seqOf {
			if e.status(id) != wamux.StatusAccepted {
				return false
			}
		}
		return true
	})
	if got := checkOrder(t, e, "9611", seqOf, []string{x, y}); got != 4 {
		t.Fatalf("accepted %d, want 4", got)
	}
	if st := e.sim.Stats().Totals; st.Requests != 4 || st.Duplicates != 0 {
		t.Fatalf("provider saw %d requests, %d duplicates; want 4 and 0", st.Requests, st.Duplicates)
	}
	if got := gaps(t, e); got != 0 {
		t.Fatalf("gaps skipped = %v, want 0: no seq was missing", got)
	}
	st, err := e.store.GetSeq(context.Background(), "acc")
	if err != nil {
		t.Fatal(err)
	}
	if st.NextSeq != 5 || st.GapsSkipped != 0 {
		t.Fatalf("stored sequence state %+v, want next seq 5, no gaps", st)
	}
}

// TestHeldSeqAfterUnstoredSkipStaysBehind: the gap timeout skipped seq 2
// and released 3, and from that step on every sequencing write failed;
// 2 arrived afterwards (held, also not stored), then the process died.
// 2 must not reach the provider after 3: neither step happened for the
// store, so the next process finds 2 and 3 waiting behind 1 and sends
// them in order, with no gap.
func TestHeldSeqAfterUnstoredSkipStaysBehind(t *testing.T) {
	clk := fakeclock.New()
	fs := &seqFailStore{}
	e := newEnv(t, envOpts{clock: clk, wrapStore: fs.wrap})
	e.addAccount("acc", "9612", 100, 100, sim.Limits{Rate: 1000})
	const x = "15559620001"
	seqOf := map[string]int64{}
	m := func(seq int64) wamux.Message {
		msg := textMsg(t, admit.Request{AccountID: "acc", ClientSeq: seqp(seq), To: x})
		seqOf[msg.ID] = seq
		return msg
	}
	e.submit(m(1))
	e.waitAccepted(1, 10*time.Second)
	e.submit(m(3))
	testwait.For(t, "seq 3 waiting for 2", 10*time.Second, func() bool {
		return metric(t, e, "wamux_seq_waiting", map[string]string{"account": "acc"}) == 1
	})

	const failing = 1 << 30
	fs.left.Store(failing)
	clk.Advance(5 * time.Minute) // the gap timeout: 2 is skipped, 3 released
	testwait.For(t, "the skip's step failing", 10*time.Second, func() bool {
		e.d.Kick()
		return fs.left.Load() < failing
	})
	e.submit(m(2))
	testwait.For(t, "the held step failing", 10*time.Second, func() bool { return fs.left.Load() < failing-1 })
	e.stop() // its last try of the step fails too: the crash

	fs.left.Store(0)
	e.reopen(fs)
	e.start()
	testwait.For(t, "every message accepted", 10*time.Second, func() bool {
		e.d.Kick()
		for id := range seqOf {
			if e.status(id) != wamux.StatusAccepted {
				return false
			}
		}
		return true
	})
	if got := checkOrder(t, e, "9612", seqOf, []string{x}); got != 3 {
		t.Fatalf("accepted %d, want 3", got)
	}
	if st := e.sim.Stats().Totals; st.Requests != 3 || st.Duplicates != 0 {
		t.Fatalf("provider saw %d requests, %d duplicates; want 3 and 0", st.Requests, st.Duplicates)
	}
	if got := gaps(t, e); got != 0 {
		t.Fatalf("gaps skipped after the restart = %v, want 0: 2 is there", got)
	}
}

// TestUnstoredSeqStepShownWaiting: a message the reorder buffer released
// waits, while its sequencing step cannot be stored, in neither the
// buffer nor the queue; it is still waiting_seq in the store and must be
// counted in wamux_seq_waiting, or an operator sees an account with
// nothing waiting and nothing queued that sends nothing. Once the step is
// stored it is sent and the gauge is back to 0.
func TestUnstoredSeqStepShownWaiting(t *testing.T) {
	clk := fakeclock.New()
	fs := &seqFailStore{}
	e := newEnv(t, envOpts{clock: clk, wrapStore: fs.wrap})
	e.addAccount("acc", "9613", 100, 100, sim.Limits{Rate: 1000})
	waiting := func() float64 { return metric(t, e, "wamux_seq_waiting", map[string]string{"account": "acc"}) }
	fs.left.Store(1 << 30)
	msg := textMsg(t, admit.Request{AccountID: "acc", ClientSeq: seqp(1), To: "15559630001"})
	e.submit(msg)
	testwait.For(t, "the sequencing step failing", 10*time.Second, func() bool { return fs.left.Load() < 1<<30 })
	testwait.For(t, "seq 1 counted waiting while its step is not stored", 10*time.Second, func() bool {
		e.d.Kick()
		return waiting() == 1
	})
	if st := e.status(msg.ID); st != wamux.StatusWaitingSeq {
		t.Fatalf("status %s while the step is not stored, want waiting_seq", st)
	}
	fs.left.Store(0)
	testwait.For(t, "seq 1 accepted once its step is stored", 10*time.Second, func() bool {
		clk.Advance(time.Second)
		e.d.Kick()
		return e.status(msg.ID) == wamux.StatusAccepted
	})
	testwait.For(t, "nothing counted waiting", 10*time.Second, func() bool {
		e.d.Kick()
		return waiting() == 0
	})
}
