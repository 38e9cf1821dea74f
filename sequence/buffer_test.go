package sequence_test

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/wamux/wamux/sequence"
	"github.com/wamux/wamux/store"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const timeout = 5 * time.Minute

func seqs(es []sequence.Entry[string]) []int64 {
	out := []int64{}
	for _, e := range es {
		out = append(out, e.Seq)
	}
	return out
}

// offer offers seq with the item "m<seq>" and checks the outcome and the
// seqs it released.
func offer(t *testing.T, b *sequence.Buffer[string], at time.Time, seq int64, want sequence.Outcome, released ...int64) {
	t.Helper()
	res, err := b.Offer(at, seq, itemOf(seq))
	if err != nil {
		t.Fatalf("Offer(%d): %v", seq, err)
	}
	if res.Outcome != want || !slices.Equal(seqs(res.Released), append([]int64{}, released...)) {
		t.Fatalf("Offer(%d) = %v releasing %v; want %v releasing %v", seq, res.Outcome, seqs(res.Released), want, released)
	}
	for _, e := range res.Released {
		if e.Item != itemOf(e.Seq) {
			t.Fatalf("released seq %d carries item %q, want %q", e.Seq, e.Item, itemOf(e.Seq))
		}
	}
	if res.State != b.State() {
		t.Fatalf("Offer(%d) reported state %+v, buffer has %+v", seq, res.State, b.State())
	}
}

func itemOf(seq int64) string { return "m" + strconv.FormatInt(seq, 10) }

func expire(t *testing.T, b *sequence.Buffer[string], at time.Time, released []int64, skipped []sequence.Range) {
	t.Helper()
	ex := b.Expire(at, timeout)
	if !slices.Equal(seqs(ex.Released), append([]int64{}, released...)) || !slices.Equal(ex.Skipped, skipped) {
		t.Fatalf("Expire at +%v released %v skipped %v; want %v and %v", at.Sub(t0), seqs(ex.Released), ex.Skipped, released, skipped)
	}
}

func TestInOrderAndReorder(t *testing.T) {
	t.Parallel()
	b := sequence.NewBuffer[string]("a", 0)
	offer(t, b, t0, 1, sequence.Released, 1)
	offer(t, b, t0, 3, sequence.Waiting)
	offer(t, b, t0, 5, sequence.Waiting)
	offer(t, b, t0, 3, sequence.Duplicate) // already waiting
	offer(t, b, t0, 2, sequence.Released, 2, 3)
	offer(t, b, t0, 4, sequence.Released, 4, 5)
	if st := b.State(); st.NextSeq != 6 || st.GapsSkipped != 0 || st.AccountID != "a" {
		t.Fatalf("state = %+v, want NextSeq 6, no gaps", st)
	}
}

func TestLateDuplicateNeverBlocks(t *testing.T) {
	t.Parallel()
	b := sequence.NewBuffer[string]("a", 0)
	offer(t, b, t0, 1, sequence.Released, 1)
	offer(t, b, t0, 2, sequence.Released, 2)
	offer(t, b, t0, 1, sequence.Duplicate)
	offer(t, b, t0, 4, sequence.Waiting)
	offer(t, b, t0, 2, sequence.Duplicate)
	offer(t, b, t0, 3, sequence.Released, 3, 4)
	offer(t, b, t0, 5, sequence.Released, 5)
	if b.Len() != 0 {
		t.Fatalf("%d items still waiting, want none", b.Len())
	}
}

func TestGapSkippedAfterTimeout(t *testing.T) {
	t.Parallel()
	b := sequence.NewBuffer[string]("a", 0)
	offer(t, b, t0, 1, sequence.Released, 1)
	offer(t, b, t0, 3, sequence.Waiting)
	expire(t, b, t0.Add(timeout-time.Nanosecond), nil, nil)
	expire(t, b, t0.Add(timeout), []int64{3}, []sequence.Range{{From: 2, To: 2}})
	if st := b.State(); st.NextSeq != 4 || st.GapsSkipped != 1 {
		t.Fatalf("state after the skip = %+v, want NextSeq 4, GapsSkipped 1", st)
	}
	// The skipped seq arriving later is held, every time; the released one
	// is a duplicate; the stream goes on.
	offer(t, b, t0.Add(time.Hour), 2, sequence.Held)
	offer(t, b, t0.Add(time.Hour), 2, sequence.Held)
	offer(t, b, t0.Add(time.Hour), 3, sequence.Duplicate)
	offer(t, b, t0.Add(time.Hour), 4, sequence.Released, 4)
}

func TestExpireBoundsEveryItemsWait(t *testing.T) {
	t.Parallel()
	// 6 arrived first, behind gaps at 2 and 4; 3 arrived later. When 6 has
	// waited the timeout, both gaps go, although 3 has waited less.
	b := sequence.NewBuffer[string]("a", 0)
	offer(t, b, t0, 1, sequence.Released, 1)
	offer(t, b, t0, 6, sequence.Waiting)
	offer(t, b, t0.Add(4*time.Minute), 3, sequence.Waiting)
	offer(t, b, t0.Add(4*time.Minute), 8, sequence.Waiting)
	expire(t, b, t0.Add(timeout), []int64{3, 6}, []sequence.Range{{From: 2, To: 2}, {From: 4, To: 5}})
	if st := b.State(); st.NextSeq != 7 || st.GapsSkipped != 3 {
		t.Fatalf("state = %+v, want NextSeq 7 and 3 seqs skipped", st)
	}
	if d, ok := b.NextDeadline(timeout); !ok || !d.Equal(t0.Add(9*time.Minute)) {
		t.Fatalf("NextDeadline = %v, %v; want 8's deadline at +9m", d, ok)
	}
	// 7 arrives in time: 8 follows without waiting its timeout out.
	offer(t, b, t0.Add(6*time.Minute), 7, sequence.Released, 7, 8)
	if _, ok := b.NextDeadline(timeout); ok {
		t.Fatal("NextDeadline reports a deadline with nothing waiting")
	}
	expire(t, b, t0.Add(time.Hour), nil, nil)
}

func TestRestoreAfterRestart(t *testing.T) {
	t.Parallel()
	before := sequence.NewBuffer[string]("a", 0)
	offer(t, before, t0, 1, sequence.Released, 1)
	offer(t, before, t0, 3, sequence.Waiting)
	offer(t, before, t0.Add(time.Minute), 5, sequence.Waiting)

	// The process dies; the store has the state and the waiting_seq rows.
	b, r, err := sequence.RestoreBuffer(before.State(), []sequence.Pending[string]{
		{Seq: 5, Item: itemOf(5), Since: t0.Add(time.Minute)},
		{Seq: 3, Item: itemOf(3), Since: t0},
	}, 0)
	if err != nil {
		t.Fatalf("RestoreBuffer: %v", err)
	}
	if len(r.Released) != 0 || len(r.Rejected) != 0 || b.Len() != 2 {
		t.Fatalf("restore = %+v with %d waiting, want both items waiting again", r, b.Len())
	}
	if b.State() != before.State() {
		t.Fatalf("restored state %+v, want %+v", b.State(), before.State())
	}
	// Gap timeouts run on from the original arrival, not from the restart.
	expire(t, b, t0.Add(timeout), []int64{3}, []sequence.Range{{From: 2, To: 2}})
	offer(t, b, t0.Add(timeout), 4, sequence.Released, 4, 5)
	// Seqs released before the restart are below the buffer's memory: Late,
	// for the caller to settle with its store. The skip after the restart
	// is remembered: Held.
	offer(t, b, t0.Add(timeout), 1, sequence.Late)
	offer(t, b, t0.Add(timeout), 2, sequence.Held)
	offer(t, b, t0.Add(timeout), 3, sequence.Duplicate)
}

func TestRestoreSettlesInconsistentRows(t *testing.T) {
	t.Parallel()
	b, r, err := sequence.RestoreBuffer(store.SeqState{AccountID: "a", NextSeq: 5, GapsSkipped: 2}, []sequence.Pending[string]{
		{Seq: 7, Item: itemOf(7), Since: t0},
		{Seq: 3, Item: itemOf(3), Since: t0}, // below NextSeq
		{Seq: 5, Item: itemOf(5), Since: t0}, // releasable at once
		{Seq: 6, Item: itemOf(6), Since: t0},
		{Seq: 7, Item: itemOf(7), Since: t0}, // repeated row
	}, 0)
	if err != nil {
		t.Fatalf("RestoreBuffer: %v", err)
	}
	if got := seqs(r.Released); !slices.Equal(got, []int64{5, 6, 7}) {
		t.Fatalf("released at restore = %v, want [5 6 7]", got)
	}
	want := []sequence.Rejected[string]{
		{Entry: sequence.Entry[string]{Seq: 3, Item: itemOf(3)}, Outcome: sequence.Late},
		{Entry: sequence.Entry[string]{Seq: 7, Item: itemOf(7)}, Outcome: sequence.Duplicate},
	}
	if !slices.Equal(r.Rejected, want) {
		t.Fatalf("rejected at restore = %+v, want %+v", r.Rejected, want)
	}
	if st := b.State(); st.NextSeq != 8 || st.GapsSkipped != 2 {
		t.Fatalf("state = %+v, want NextSeq 8, GapsSkipped kept at 2", st)
	}
}

func TestSkipMemoryIsBounded(t *testing.T) {
	t.Parallel()
	b := sequence.NewBuffer[string]("a", 2)
	now := t0
	// Skip 1, 3, 5 (three ranges) with a memory of two.
	for _, s := range []int64{2, 4, 6} {
		offer(t, b, now, s, sequence.Waiting)
		now = now.Add(timeout)
		b.Expire(now, timeout)
	}
	offer(t, b, now, 1, sequence.Late)      // forgotten
	offer(t, b, now, 2, sequence.Duplicate) // released after the forgotten range
	offer(t, b, now, 3, sequence.Held)
	offer(t, b, now, 5, sequence.Held)
	offer(t, b, now, 4, sequence.Duplicate)
	if st := b.State(); st.GapsSkipped != 3 || st.NextSeq != 7 {
		t.Fatalf("state = %+v, want 3 skipped, NextSeq 7", st)
	}
}

func TestInvalidInput(t *testing.T) {
	t.Parallel()
	b := sequence.NewBuffer[string]("a", 0)
	for _, s := range []int64{0, -1} {
		if _, err := b.Offer(t0, s, "x"); !errors.Is(err, sequence.ErrInvalidSeq) {
			t.Errorf("Offer(%d) error = %v, want ErrInvalidSeq", s, err)
		}
	}
	if _, _, err := sequence.RestoreBuffer[string](store.SeqState{AccountID: "a"}, nil, 0); !errors.Is(err, sequence.ErrInvalidSeq) {
		t.Errorf("RestoreBuffer with NextSeq 0 error = %v, want ErrInvalidSeq", err)
	}
	offer(t, b, t0, 1, sequence.Released, 1)
}

// TestPassMovesNextSeqWithoutGaps: seqs that went out while ordering was
// off move NextSeq, so nothing waits for them later; a seq they jumped
// over is Held when it comes, and nothing counts as a skipped gap.
func TestPassMovesNextSeqWithoutGaps(t *testing.T) {
	t.Parallel()
	b := sequence.NewBuffer[string]("a", 0)
	offer(t, b, t0, 1, sequence.Released, 1)
	for _, seq := range []int64{2, 3, 5, 4} {
		if _, err := b.Pass(t0, seq); err != nil {
			t.Fatalf("Pass(%d): %v", seq, err)
		}
	}
	if st := b.State(); st.NextSeq != 6 || st.GapsSkipped != 0 {
		t.Fatalf("after passing 2, 3, 5, 4: %+v, want NextSeq 6 and no gaps", st)
	}
	offer(t, b, t0, 6, sequence.Released, 6)
	offer(t, b, t0, 5, sequence.Duplicate)
	if changed, err := b.Pass(t0, 8); !changed || err != nil {
		t.Fatalf("Pass(8) = %v, %v; want a change", changed, err)
	}
	offer(t, b, t0, 7, sequence.Held) // jumped over by 8
	offer(t, b, t0, 9, sequence.Released, 9)
	offer(t, b, t0, 11, sequence.Waiting)
	if _, err := b.Pass(t0, 12); !errors.Is(err, sequence.ErrItemsWaiting) {
		t.Fatalf("Pass while 11 waits: %v, want ErrItemsWaiting", err)
	}
	if _, err := b.Pass(t0, 0); !errors.Is(err, sequence.ErrInvalidSeq) {
		t.Fatalf("Pass(0): %v, want ErrInvalidSeq", err)
	}
}
