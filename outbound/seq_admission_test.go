package outbound_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
)

// seqMsg is the account's message with client_seq seq to one recipient.
func seqMsg(t *testing.T, account, to string, seq int64) wamux.Message {
	t.Helper()
	return textMsg(t, admit.Request{AccountID: account, ClientSeq: seqp(seq), To: to})
}

// submitOne submits m alone and returns its error (nil: admitted).
func (e *env) submitOne(m wamux.Message) error {
	e.t.Helper()
	res, err := e.d.Submit(context.Background(), []wamux.Message{m})
	if err != nil {
		e.t.Fatal(err)
	}
	return res[0].Err
}

// waitWaiting waits until the account's reorder buffer holds n messages
// and its worker has published that to admission.
func waitWaiting(t *testing.T, e *env, account string, n int) {
	t.Helper()
	testwait.For(t, fmt.Sprintf("%d messages waiting_seq", n), 10*time.Second, func() bool {
		return metric(t, e, "wamux_seq_waiting", map[string]string{"account": account}) == float64(n)
	})
	e.d.Settle(account)
}

// TestGapFillerIsAdmittedWhenWaitingFillsTheBound: with queue_max_depth
// 10, seqs 2–11 wait for seq 1 and take the whole bound. A seq that would
// only wait behind the gap too (12) is refused queue_full, but seq 1,
// which the waiting ones need, is admitted: the account sends 1–11 in
// order at once, with nothing skipped or held, and then takes seq 12.
// Refusing seq 1 left the account stuck until gap_timeout skipped it and
// parked its retry as held.
func TestGapFillerIsAdmittedWhenWaitingFillsTheBound(t *testing.T) {
	clk := fakeclock.New() // frozen: the gap timeout never runs out
	e := newEnv(t, envOpts{clock: clk, settings: map[string]string{"queue_max_depth": "10"}})
	e.addAccount("acc", "9701", 100, 100, sim.Limits{Rate: 1000})
	const to = "15559700001"
	for seq := int64(2); seq <= 11; seq++ {
		if err := e.submitOne(seqMsg(t, "acc", to, seq)); err != nil {
			if seq == 11 && wamux.ErrorCode(err) == wamux.EQueueFull {
				break // P1 may use 90 % of the bound
			}
			t.Fatalf("seq %d: %v", seq, err)
		}
	}
	waitWaiting(t, e, "acc", 9)
	if err := e.submitOne(seqMsg(t, "acc", to, 12)); wamux.ErrorCode(err) != wamux.EQueueFull {
		t.Fatalf("seq 12, which would only wait behind the gap: error %v, want %s", err, wamux.EQueueFull)
	}
	if err := e.submitOne(seqMsg(t, "acc", to, 1)); err != nil {
		t.Fatalf("seq 1, the gap filler, was refused: %v", err)
	}
	e.waitAccepted(10, 10*time.Second)
	if err := e.submitOne(seqMsg(t, "acc", to, 11)); err != nil {
		t.Fatalf("seq 11 after the release: %v", err)
	}
	e.waitAccepted(11, 10*time.Second)
	var want []string
	for seq := int64(1); seq <= 11; seq++ {
		want = append(want, seqMsg(t, "acc", to, seq).ID)
	}
	if got := sentFrom(e, "9701", to); !slices.Equal(got, want) {
		t.Fatalf("sent %v, want seqs 1–11 in order %v", got, want)
	}
	if got := metric(t, e, "wamux_seq_gaps_skipped_total", map[string]string{"account": "acc"}); got != 0 {
		t.Fatalf("%v seqs skipped, want none", got)
	}
}

// TestFarFutureSeqsStayBounded: seqs far ahead of the next expected one
// only wait, so they stay within the account's bound however many a
// client sends; the gap fillers in front of them still get in.
func TestFarFutureSeqsStayBounded(t *testing.T) {
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk, settings: map[string]string{"queue_max_depth": "10"}})
	e.addAccount("acc", "9702", 100, 100, sim.Limits{Rate: 1000})
	const to = "15559700002"
	admitted := 0
	for seq := int64(1000); seq < 1100; seq++ {
		if e.submitOne(seqMsg(t, "acc", to, seq)) == nil {
			admitted++
		}
	}
	if admitted != 9 {
		t.Fatalf("%d far-future seqs admitted, want 9 (90 %% of 10)", admitted)
	}
	waitWaiting(t, e, "acc", 9)
	for seq := int64(1); seq <= 3; seq++ {
		if err := e.submitOne(seqMsg(t, "acc", to, seq)); err != nil {
			t.Fatalf("seq %d, next in line: %v", seq, err)
		}
		e.waitAccepted(seq, 10*time.Second)
		e.d.Settle("acc")
	}
	if err := e.submitOne(seqMsg(t, "acc", to, 500)); wamux.ErrorCode(err) != wamux.EQueueFull {
		t.Fatalf("seq 500 behind the gap: error %v, want %s", err, wamux.EQueueFull)
	}
}

// TestPermutedSeqsUnderASmallBoundAllGoOutInOrder: for any arrival order
// of seqs 1..n, sent alone or in small batches to an account whose bound
// (queue_max_depth 10, of which P1 may use 9) is smaller than what may wait, a client that
// retries every queue_full once the account has sent what it could gets
// every message in: the provider receives 1..n in order, nothing is held
// or skipped, and no more than the bound ever waits. The clock is frozen,
// so only admission can let the missing seq in.
func TestPermutedSeqsUnderASmallBoundAllGoOutInOrder(t *testing.T) {
	const bound = 9
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk, settings: map[string]string{"queue_max_depth": "10"}})
	round := 0
	rapid.Check(t, func(rt *rapid.T) {
		round++
		acc, pnid, to := fmt.Sprintf("perm-%d", round), fmt.Sprintf("98%04d", round), fmt.Sprintf("1555980%04d", round)
		e.addAccount(acc, pnid, 100, 100, sim.Limits{Rate: 1000})
		n := rapid.IntRange(2, 24).Draw(rt, "n")
		seqs := make([]int64, n)
		for i := range seqs {
			seqs[i] = int64(i + 1)
		}
		pending := rapid.Permutation(seqs).Draw(rt, "arrival")
		drained := func() {
			testwait.For(t, "the account sent what it could", 10*time.Second, func() bool {
				return depthSum(e, acc) == 0 && e.d.AttemptsRunning(acc) == 0
			})
			e.d.Settle(acc)
			if w := metric(t, e, "wamux_seq_waiting", map[string]string{"account": acc}); w > bound {
				rt.Fatalf("%v messages waiting, over the bound of %d", w, bound)
			}
		}
		for tries := 0; len(pending) > 0; tries++ {
			if tries > n*n {
				rt.Fatalf("seqs %v still refused after %d submissions", pending, tries)
			}
			k := min(len(pending), rapid.IntRange(1, 4).Draw(rt, "batch"))
			batch := make([]wamux.Message, k)
			for i, seq := range pending[:k] {
				batch[i] = seqMsg(t, acc, to, seq)
			}
			res, err := e.d.Submit(context.Background(), batch)
			if err != nil {
				t.Fatal(err)
			}
			var refused []int64
			for i, r := range res {
				switch {
				case r.Err == nil:
				case wamux.ErrorCode(r.Err) == wamux.EQueueFull:
					refused = append(refused, pending[i])
				default:
					rt.Fatalf("seq %d: %v", pending[i], r.Err)
				}
			}
			pending = append(pending[k:], refused...)
			if len(refused) > 0 {
				drained()
			}
		}
		testwait.For(t, "every seq sent", 10*time.Second, func() bool { return len(sentFrom(e, pnid, to)) >= n })
		var want []string
		for _, seq := range seqs {
			want = append(want, seqMsg(t, acc, to, seq).ID)
		}
		if got := sentFrom(e, pnid, to); !slices.Equal(got, want) {
			rt.Fatalf("sent %v, want seqs 1..%d in order %v", got, n, want)
		}
		if got := metric(t, e, "wamux_seq_gaps_skipped_total", map[string]string{"account": acc}); got != 0 {
			rt.Fatalf("%v seqs skipped, want none", got)
		}
	})
}
