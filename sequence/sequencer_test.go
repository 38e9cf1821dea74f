package sequence_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/sequence"
	"github.com/wamux/wamux/store"
)

func newSequencer(t *testing.T, clk *fakeclock.Clock) *sequence.Sequencer[string] {
	t.Helper()
	s, err := sequence.New[string](sequence.Config{Clock: clk})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func TestSequencerAccountsIndependent(t *testing.T) {
	t.Parallel()
	clk := fakeclock.NewAt(t0)
	s := newSequencer(t, clk)
	if r, _ := s.Offer("a", 2, "a2"); r.Outcome != sequence.Waiting {
		t.Fatalf("a:2 = %v, want waiting", r.Outcome)
	}
	if r, _ := s.Offer("b", 1, "b1"); r.Outcome != sequence.Released {
		t.Fatalf("b:1 = %v, want released while a waits", r.Outcome)
	}
	if s.Waiting("a") != 1 || s.Waiting("b") != 0 || s.Waiting("c") != 0 {
		t.Fatalf("waiting a=%d b=%d c=%d, want 1 0 0", s.Waiting("a"), s.Waiting("b"), s.Waiting("c"))
	}
	if st := s.State("b"); st.AccountID != "b" || st.NextSeq != 2 {
		t.Fatalf("State(b) = %+v, want NextSeq 2", st)
	}
}

func TestSequencerGapTimeoutAtRuntime(t *testing.T) {
	t.Parallel()
	clk := fakeclock.NewAt(t0)
	s := newSequencer(t, clk)
	if s.GapTimeout() != sequence.DefaultGapTimeout {
		t.Fatalf("GapTimeout = %v, want the default %v", s.GapTimeout(), sequence.DefaultGapTimeout)
	}
	s.Offer("a", 2, "a2")
	clk.Advance(time.Minute)
	s.Offer("b", 3, "b3")
	if d, ok := s.NextDeadline(); !ok || !d.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("NextDeadline = %v, %v; want a's at +5m", d, ok)
	}
	clk.Advance(time.Minute) // +2m: nothing is due under 5m
	if ex := s.Expire(); len(ex) != 0 {
		t.Fatalf("Expire at +2m = %+v, want nothing", ex)
	}
	// Lowering the timeout applies to items already waiting, from when
	// they arrived: a has waited 2m, b 1m.
	if err := s.SetGapTimeout(90 * time.Second); err != nil {
		t.Fatal(err)
	}
	ex := s.Expire()
	if len(ex) != 1 || ex[0].AccountID != "a" || !slices.Equal(seqs(ex[0].Released), []int64{2}) ||
		!slices.Equal(ex[0].Skipped, []sequence.Range{{From: 1, To: 1}}) || ex[0].State.GapsSkipped != 1 {
		t.Fatalf("Expire after lowering the timeout = %+v, want a: 1 skipped, 2 released", ex)
	}
	if d, ok := s.NextDeadline(); !ok || !d.Equal(t0.Add(time.Minute+90*time.Second)) {
		t.Fatalf("NextDeadline = %v, %v; want b's at +2m30s", d, ok)
	}
	if err := s.SetGapTimeout(-time.Second); !errors.Is(err, sequence.ErrInvalidTimeout) {
		t.Fatalf("SetGapTimeout(-1s) error = %v, want ErrInvalidTimeout", err)
	}
	if _, err := sequence.New[string](sequence.Config{GapTimeout: -time.Second}); !errors.Is(err, sequence.ErrInvalidTimeout) {
		t.Fatalf("New with a negative timeout error = %v, want ErrInvalidTimeout", err)
	}
}

func TestSequencerRestore(t *testing.T) {
	t.Parallel()
	clk := fakeclock.NewAt(t0.Add(time.Hour))
	s := newSequencer(t, clk)
	r, err := s.Restore(store.SeqState{AccountID: "a", NextSeq: 10, GapsSkipped: 4}, []sequence.Pending[string]{
		{Seq: 12, Item: "a12", Since: t0.Add(58 * time.Minute)},
	})
	if err != nil || len(r.Released) != 0 || len(r.Rejected) != 0 {
		t.Fatalf("Restore = %+v, %v", r, err)
	}
	if res, _ := s.Offer("a", 3, "a3"); res.Outcome != sequence.Late {
		t.Fatalf("a seq from before the restart = %v, want late", res.Outcome)
	}
	if res, _ := s.Offer("a", 10, "a10"); !slices.Equal(seqs(res.Released), []int64{10}) {
		t.Fatalf("Offer(10) released %v, want [10]", seqs(res.Released))
	}
	clk.Advance(3 * time.Minute) // 12 has waited 5m since before the restart
	ex := s.Expire()
	if len(ex) != 1 || !slices.Equal(seqs(ex[0].Released), []int64{12}) || ex[0].State.GapsSkipped != 5 || ex[0].State.NextSeq != 13 {
		t.Fatalf("Expire = %+v, want 11 skipped (5 in all) and 12 released", ex)
	}
	if _, err := s.Restore(store.SeqState{AccountID: "a"}, nil); !errors.Is(err, sequence.ErrInvalidSeq) {
		t.Fatalf("Restore with NextSeq 0 error = %v, want ErrInvalidSeq", err)
	}
}

// Many goroutines offer shuffled, duplicated seqs of several accounts while
// another expires and changes the timeout; each account still releases
// 1..N exactly once, each result in contiguous order.
func TestSequencerConcurrent(t *testing.T) {
	t.Parallel()
	const (
		accounts = 4
		workers  = 4
		n        = 300
	)
	clk := fakeclock.NewAt(t0)
	s := newSequencer(t, clk)
	var (
		mu       sync.Mutex
		released = map[string][]int64{}
		bad      []string
		wg       sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			for i := range n {
				// Worker w offers seq i+1 of every account in a worker-specific
				// order; all workers offer every seq, so most are duplicates.
				seq := int64((i*7+w*13)%n + 1)
				for a := range accounts {
					acct := fmt.Sprintf("acct%d", a)
					res, err := s.Offer(acct, seq, "x")
					mu.Lock()
					if err != nil {
						bad = append(bad, err.Error())
					}
					got := seqs(res.Released)
					for j := 1; j < len(got); j++ {
						if got[j] != got[j-1]+1 {
							bad = append(bad, fmt.Sprintf("%s: non-contiguous release %v", acct, got))
						}
					}
					released[acct] = append(released[acct], got...)
					mu.Unlock()
				}
			}
		})
	}
	wg.Go(func() {
		for range 100 {
			if ex := s.Expire(); len(ex) != 0 {
				mu.Lock()
				bad = append(bad, fmt.Sprintf("Expire with a frozen clock released %+v", ex))
				mu.Unlock()
			}
			s.NextDeadline()
			if err := s.SetGapTimeout(time.Hour); err != nil {
				mu.Lock()
				bad = append(bad, err.Error())
				mu.Unlock()
			}
		}
	})
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d problems, first: %s", len(bad), bad[0])
	}
	for a := range accounts {
		acct := fmt.Sprintf("acct%d", a)
		got := slices.Clone(released[acct])
		slices.Sort(got)
		if len(got) != n || got[0] != 1 || got[n-1] != n || len(slices.Compact(got)) != n {
			t.Fatalf("%s released %d seqs, want 1..%d exactly once", acct, len(released[acct]), n)
		}
		if st := s.State(acct); st.NextSeq != n+1 {
			t.Fatalf("%s NextSeq = %d, want %d", acct, st.NextSeq, n+1)
		}
	}
}
