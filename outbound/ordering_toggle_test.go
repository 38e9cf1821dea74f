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
)

// TestOrderingBackOnFollowsSeqsSentWhileOff: seqs sent while ordering was
// off (dedup only) are not waited for once it is on again, at runtime or
// after a restart: the next seq goes out at once and no gap is counted.
// The clock here never reaches the gap_timeout, so a wait for seqs
// already delivered shows as a message never sent. A seq the off period jumped over and that arrives after ordering is on
// again is out of order: it is held, not sent.
func TestOrderingBackOnFollowsSeqsSentWhileOff(t *testing.T) {
	clk := fakeclock.New() // frozen: the gap timeout never runs out
	e := newEnv(t, envOpts{clock: clk})
	e.addAccount("acc", "9501", 100, 100, sim.Limits{Rate: 1000})
	m := func(seq int64) wamux.Message {
		return textMsg(t, admit.Request{AccountID: "acc", ClientSeq: seqp(seq), To: "15559500001"})
	}
	ordering := func(on string) {
		t.Helper()
		if _, err := e.settings.Update(context.Background(), map[string]string{"ordering": on}); err != nil {
			t.Fatal(err)
		}
	}
	e.submit(m(1))
	e.waitAccepted(1, 10*time.Second)

	ordering("false")
	e.submit(m(2))
	e.submit(m(3))
	e.submit(m(5)) // 4 comes after ordering is on again
	e.waitAccepted(4, 10*time.Second)
	ordering("true")
	e.submit(m(6))
	e.waitAccepted(5, 10*time.Second)
	four := m(4)
	e.submit(four)
	testwait.For(t, "seq 4 held", 5*time.Second, func() bool { return e.status(four.ID) == wamux.StatusHeld })
	if got := gaps(t, e); got != 0 {
		t.Fatalf("gaps skipped = %v, want 0: nothing waited", got)
	}

	ordering("false")
	e.submit(m(7))
	e.submit(m(9)) // 8 comes after the restart
	e.waitAccepted(7, 10*time.Second)
	e.stop()
	ordering("true")
	e.start()
	e.submit(m(10))
	e.waitAccepted(8, 10*time.Second)
	eight := m(8)
	e.submit(eight)
	testwait.For(t, "seq 8 held", 5*time.Second, func() bool { return e.status(eight.ID) == wamux.StatusHeld })
	if got := gaps(t, e); got != 0 {
		t.Fatalf("gaps skipped after the restart = %v, want 0: nothing waited", got)
	}
	if st, err := e.store.GetSeq(context.Background(), "acc"); err != nil || st.GapsSkipped != 0 || st.NextSeq != 11 {
		t.Fatalf("stored sequence state %+v (%v), want next seq 11 and no gaps", st, err)
	}
	if got := e.sim.Stats().Totals.Accepted; got != 8 {
		t.Fatalf("accepted %d, want 8 (seqs 4 and 8 held)", got)
	}
}
