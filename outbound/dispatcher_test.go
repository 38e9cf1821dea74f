package outbound_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
)

// checkOrder asserts that, per recipient, the simulator accepted the
// messages of one account in client_seq order, each exactly once.
func checkOrder(t *testing.T, e *env, pnid string, seqOf map[string]int64, recipients []string) int {
	t.Helper()
	total := 0
	for _, to := range recipients {
		last := int64(0)
		seen := map[string]bool{}
		for _, m := range e.sim.Messages(pnid, to) {
			seq, ok := seqOf[m.CallbackData]
			if !ok {
				t.Fatalf("the simulator accepted an unknown callback data %q", m.CallbackData)
			}
			if seen[m.CallbackData] {
				t.Fatalf("msg_id %s (seq %d) accepted twice", m.CallbackData, seq)
			}
			seen[m.CallbackData] = true
			if seq <= last {
				t.Fatalf("recipient %s: seq %d accepted after seq %d", to, seq, last)
			}
			last = seq
			total++
		}
	}
	return total
}

// TestPermutedSeqsReachProviderOnceInOrder: 1,000 messages with client_seq
// 1..1000, submitted as a random permutation by 8 concurrent clients,
// reach the simulator exactly once each and in order per recipient.
func TestPermutedSeqsReachProviderOnceInOrder(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.addAccount("acc", "1001", 500, 50, sim.Limits{Rate: 1000, Burst: 1000})
	const n, clients = 1000, 8
	recipients := make([]string, 25)
	for i := range recipients {
		recipients[i] = fmt.Sprintf("1555000%04d", i)
	}
	msgs := make([]wamux.Message, n)
	seqOf := map[string]int64{}
	for i := range msgs {
		seq := int64(i + 1)
		msgs[i] = textMsg(t, admit.Request{AccountID: "acc", ClientSeq: seqp(seq), To: recipients[i%len(recipients)]})
		seqOf[msgs[i].ID] = seq
	}
	rand.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := c; i < n; i += clients {
				// Some clients retry: the repeat must be a duplicate.
				res := e.submit(msgs[i])
				if i%7 == 0 {
					if again := e.submit(msgs[i]); !again[0].Duplicate {
						t.Errorf("a repeated submission of %s was not a duplicate", msgs[i].ID)
					}
				}
				_ = res
			}
		}(c)
	}
	wg.Wait()
	e.waitAccepted(n, 60*time.Second)
	if got := checkOrder(t, e, "1001", seqOf, recipients); got != n {
		t.Fatalf("accepted %d messages, want %d", got, n)
	}
	st := e.sim.Stats().Totals
	if st.Duplicates != 0 || st.OverLimit != 0 {
		t.Fatalf("duplicates at provider %d, over limit %d", st.Duplicates, st.OverLimit)
	}
	testwait.For(t, "all messages recorded accepted", 10*time.Second, func() bool {
		for id := range seqOf {
			if e.status(id) != wamux.StatusAccepted {
				return false
			}
		}
		return true
	})
}

// TestLateDuplicateDoesNotBlock: a repeat of an already released seq is a
// duplicate and later seqs still go out.
func TestLateDuplicateDoesNotBlock(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.addAccount("acc", "1002", 100, 10, sim.Limits{Rate: 1000})
	m := func(seq int64) wamux.Message {
		return textMsg(t, admit.Request{AccountID: "acc", ClientSeq: seqp(seq), To: "15550001111"})
	}
	e.submit(m(1), m(2))
	e.waitAccepted(2, 10*time.Second)
	if r := e.submit(m(1)); !r[0].Duplicate {
		t.Fatal("late repeat of seq 1 was not a duplicate")
	}
	e.submit(m(3))
	e.waitAccepted(3, 10*time.Second)
	if st := e.sim.Stats().Totals; st.Accepted != 3 || st.Duplicates != 0 {
		t.Fatalf("accepted %d, duplicates %d", st.Accepted, st.Duplicates)
	}
}

// TestGapSkipThenHeldThenRelease uses an injected clock: seq 1 is missing,
// 2 and 3 wait; after gap_timeout they go out and the gap is counted; seq 1
// arriving later is held, and an operator's release sends it.
func TestGapSkipThenHeldThenRelease(t *testing.T) {
	clock := fakeclock.New()
	e := newEnv(t, envOpts{clock: clock, settings: map[string]string{"gap_timeout": "1m"}})
	e.addAccount("acc", "1003", 100, 100, sim.Limits{Rate: 1000})
	m := func(seq int64) wamux.Message {
		return textMsg(t, admit.Request{AccountID: "acc", ClientSeq: seqp(seq), To: "15550002222"})
	}
	two, three := m(2), m(3)
	res := e.submit(two, three)
	if res[0].Message.Status != wamux.StatusWaitingSeq {
		t.Fatalf("status %s, want waiting_seq", res[0].Message.Status)
	}
	testwait.For(t, "seq 2 and 3 to be waiting in the buffer", 5*time.Second, func() bool {
		return metric(t, e, "wamux_seq_waiting", map[string]string{"account": "acc"}) == 2
	})
	if got := e.sim.Stats().Totals.Accepted; got != 0 {
		t.Fatalf("%d messages sent before the gap timeout", got)
	}
	if e.status(two.ID) != wamux.StatusWaitingSeq {
		t.Fatalf("seq 2 status %s", e.status(two.ID))
	}
	clock.Advance(61 * time.Second)
	e.d.Kick()
	e.waitAccepted(2, 10*time.Second)
	if got := gaps(t, e); got != 1 {
		t.Fatalf("gaps skipped = %v, want 1", got)
	}
	one := m(1)
	e.submit(one)
	testwait.For(t, "seq 1 held", 5*time.Second, func() bool { return e.status(one.ID) == wamux.StatusHeld })
	if got := e.sim.Stats().Totals.Accepted; got != 2 {
		t.Fatalf("a held message was sent: %d accepted", got)
	}
	if _, err := e.d.Drop(context.Background(), two.ID); wamux.ErrorCode(err) != wamux.EConflict {
		t.Fatalf("dropping a message that is not held: %v", err)
	}
	if _, err := e.d.Release(context.Background(), one.ID); err != nil {
		t.Fatal(err)
	}
	e.waitAccepted(3, 10*time.Second)
	msgs := e.sim.Messages("1003", "15550002222")
	if len(msgs) != 3 || msgs[2].CallbackData != one.ID {
		t.Fatalf("after release: %d accepted, last %q", len(msgs), msgs[len(msgs)-1].CallbackData)
	}
}

// metric returns the sum of a metric's series whose labels include want.
func metric(t *testing.T, e *env, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				total += m.Counter.GetValue()
			case m.Gauge != nil:
				total += m.Gauge.GetValue()
			case m.Histogram != nil:
				total += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return total
}

func gaps(t *testing.T, e *env) float64 {
	return metric(t, e, "wamux_seq_gaps_skipped_total", nil)
}

// TestOrderingOffIsDedupOnly: with the ordering switch off, a message whose
// predecessor is missing goes out at once (dedup still holds), and turning
// it off releases what was already waiting.
func TestOrderingOffIsDedupOnly(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.addAccount("acc", "1004", 100, 10, sim.Limits{Rate: 1000})
	m := func(seq int64) wamux.Message {
		return textMsg(t, admit.Request{AccountID: "acc", ClientSeq: seqp(seq), To: "15550003333"})
	}
	e.submit(m(2))
	testwait.For(t, "seq 2 waiting", 5*time.Second, func() bool {
		return metric(t, e, "wamux_seq_waiting", map[string]string{"account": "acc"}) == 1
	})
	if _, err := e.settings.Update(context.Background(), map[string]string{"ordering": "false"}); err != nil {
		t.Fatal(err)
	}
	e.waitAccepted(1, 10*time.Second)
	e.submit(m(5))
	e.waitAccepted(2, 10*time.Second)
	if r := e.submit(m(5)); !r[0].Duplicate {
		t.Fatal("with ordering off a repeat must still be a duplicate")
	}
	if st := e.sim.Stats().Totals; st.Duplicates != 0 || st.Accepted != 2 {
		t.Fatalf("accepted %d, duplicates %d", st.Accepted, st.Duplicates)
	}
}
