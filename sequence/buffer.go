package sequence

import (
	"container/heap"
	"fmt"
	"sort"
	"time"

	"github.com/wamux/wamux/store"
)

// Buffer is one account's reorder buffer on client_seq. It is not safe for
// concurrent use; the Sequencer serialises access to it.
type Buffer[T any] struct {
	state store.SeqState

	waiting   map[int64]*waiter[T]
	bySeq     seqHeap
	byArrival arrivalHeap[T]

	// skipped holds the most recent skip ranges, ascending and disjoint.
	// knownFrom is the lowest seq whose fate the buffer remembers: below
	// it, a seq under NextSeq is Late.
	skipped    []Range
	knownFrom  int64
	maxSkipped int
}

// Result is what one Offer did.
type Result[T any] struct {
	// Outcome is the offered item's fate.
	Outcome Outcome
	// Released is what became releasable, in seq order; it holds the
	// offered item when Outcome is Released.
	Released []Entry[T]
	// State is the account's sequence state after the offer; persist it
	// with the status changes of Released.
	State store.SeqState
}

// Expired is what one Expire did.
type Expired[T any] struct {
	// Released is what became releasable by skipping, in seq order.
	Released []Entry[T]
	// Skipped are the seqs given up on, ascending.
	Skipped []Range
	// State is the account's sequence state afterwards.
	State store.SeqState
}

// Restored is what RestoreBuffer found in the reloaded items.
type Restored[T any] struct {
	// Released are items that were releasable right away (a crash between
	// a release and its status update leaves such items behind).
	Released []Entry[T]
	// Rejected are items that cannot wait: their seq is below NextSeq
	// (Late) or repeats another one (Duplicate).
	Rejected []Rejected[T]
}

// Rejected is a reloaded item that did not go back into the buffer.
type Rejected[T any] struct {
	Entry[T]
	Outcome Outcome
}

// NewBuffer returns the buffer of an account that never sent a seq:
// NextSeq 1, as the store reports a fresh account.
func NewBuffer[T any](accountID string, maxSkipped int) *Buffer[T] {
	b, _, err := RestoreBuffer[T](store.SeqState{AccountID: accountID, NextSeq: 1}, nil, maxSkipped)
	if err != nil {
		panic(fmt.Sprintf("sequence: fresh buffer: %v", err)) // NextSeq 1 is valid
	}
	return b
}

// RestoreBuffer rebuilds an account's buffer after a restart from its
// stored state and the items that were waiting (status waiting_seq). The
// rebuilt buffer releases, waits and skips as the old one would have: each
// item's gap timeout runs from its Since. What it cannot know is which
// seqs below NextSeq were skipped; those come back as Late.
// maxSkipped ≤ 0 means DefaultMaxSkipped.
func RestoreBuffer[T any](state store.SeqState, pending []Pending[T], maxSkipped int) (*Buffer[T], Restored[T], error) {
	if state.NextSeq < 1 {
		return nil, Restored[T]{}, fmt.Errorf("restore sequence of %s: next seq %d: %w", state.AccountID, state.NextSeq, ErrInvalidSeq)
	}
	if maxSkipped <= 0 {
		maxSkipped = DefaultMaxSkipped
	}
	b := &Buffer[T]{
		state:      state,
		waiting:    make(map[int64]*waiter[T]),
		knownFrom:  state.NextSeq,
		maxSkipped: maxSkipped,
	}
	sorted := make([]Pending[T], len(pending))
	copy(sorted, pending)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Seq < sorted[j].Seq })
	var r Restored[T]
	for _, p := range sorted {
		res, err := b.Offer(p.Since, p.Seq, p.Item)
		if err != nil {
			return nil, Restored[T]{}, fmt.Errorf("restore sequence of %s: %w", state.AccountID, err)
		}
		switch res.Outcome {
		case Released, Waiting:
			r.Released = append(r.Released, res.Released...)
		default:
			r.Rejected = append(r.Rejected, Rejected[T]{Entry: Entry[T]{Seq: p.Seq, Item: p.Item}, Outcome: res.Outcome})
		}
	}
	return b, r, nil
}

// State returns the account's sequence state for the store.
func (b *Buffer[T]) State() store.SeqState { return b.state }

// Len is the number of waiting items.
func (b *Buffer[T]) Len() int { return len(b.waiting) }

// Waits reports whether an item with seq waits in the buffer.
func (b *Buffer[T]) Waits(seq int64) bool { return b.waiting[seq] != nil }

// Offer hands the buffer one item at now and reports its fate and what
// became releasable.
func (b *Buffer[T]) Offer(now time.Time, seq int64, item T) (Result[T], error) {
	if seq < 1 {
		return Result[T]{}, fmt.Errorf("offer seq %d of %s: %w", seq, b.state.AccountID, ErrInvalidSeq)
	}
	res := Result[T]{}
	switch {
	case seq < b.state.NextSeq:
		res.Outcome = b.classifyPast(seq)
	case b.waiting[seq] != nil:
		res.Outcome = Duplicate
	case seq == b.state.NextSeq:
		res.Outcome = Released
		res.Released = append(res.Released, Entry[T]{Seq: seq, Item: item})
		b.state.NextSeq++
		res.Released = b.drain(res.Released)
		b.state.UpdatedAt = now
	default:
		res.Outcome = Waiting
		w := &waiter[T]{seq: seq, item: item, since: now}
		b.waiting[seq] = w
		heap.Push(&b.bySeq, seq)
		heap.Push(&b.byArrival, w)
	}
	res.State = b.state
	return res, nil
}

// Pass records that seq went out without the buffer, as it does while
// ordering is switched off (dedup only), and reports whether the state
// changed. NextSeq moves past seq, so that once ordering is on again
// nothing waits for a seq that was already sent. The seqs it jumped over
// are remembered like skipped ones (one arriving later is Held: it would
// now go out of order) but not counted in GapsSkipped: nobody waited for
// them. Items waiting in the buffer must be released first.
func (b *Buffer[T]) Pass(now time.Time, seq int64) (bool, error) {
	switch {
	case seq < 1:
		return false, fmt.Errorf("pass seq %d of %s: %w", seq, b.state.AccountID, ErrInvalidSeq)
	case len(b.waiting) > 0:
		return false, fmt.Errorf("pass seq %d of %s: %w", seq, b.state.AccountID, ErrItemsWaiting)
	case seq < b.state.NextSeq:
		return false, nil
	}
	if seq > b.state.NextSeq {
		b.remember(Range{From: b.state.NextSeq, To: seq - 1})
	}
	b.state.NextSeq = seq + 1
	b.state.UpdatedAt = now
	return true, nil
}

// classifyPast tells what a seq below NextSeq was.
func (b *Buffer[T]) classifyPast(seq int64) Outcome {
	if seq < b.knownFrom {
		return Late
	}
	i := sort.Search(len(b.skipped), func(i int) bool { return b.skipped[i].To >= seq })
	if i < len(b.skipped) && b.skipped[i].From <= seq {
		return Held
	}
	return Duplicate
}

// release takes the smallest waiting seq out of the buffer; it must be
// NextSeq.
func (b *Buffer[T]) release(out []Entry[T]) []Entry[T] {
	seq := heap.Pop(&b.bySeq).(int64)
	w := b.waiting[seq]
	delete(b.waiting, seq)
	if w.idx >= 0 {
		heap.Remove(&b.byArrival, w.idx)
	}
	b.state.NextSeq = seq + 1
	return append(out, Entry[T]{Seq: seq, Item: w.item})
}

// drain releases waiting items while they are contiguous with NextSeq.
func (b *Buffer[T]) drain(out []Entry[T]) []Entry[T] {
	for len(b.bySeq) > 0 && b.bySeq[0] == b.state.NextSeq {
		out = b.release(out)
	}
	return out
}

// Expire skips the gaps in front of every item that has waited at least
// timeout by now: all missing seqs below the highest such item are given
// up on, and everything waiting up to it (then anything contiguous) is
// released in order. An item never waits longer than timeout, whatever
// other gaps lie before it.
func (b *Buffer[T]) Expire(now time.Time, timeout time.Duration) Expired[T] {
	cutoff := now.Add(-timeout)
	target := int64(0)
	for len(b.byArrival) > 0 && !b.byArrival[0].since.After(cutoff) {
		w := heap.Pop(&b.byArrival).(*waiter[T])
		target = max(target, w.seq)
	}
	var ex Expired[T]
	if target == 0 {
		ex.State = b.state
		return ex
	}
	for len(b.bySeq) > 0 && b.bySeq[0] <= target {
		if head := b.bySeq[0]; head > b.state.NextSeq {
			ex.Skipped = append(ex.Skipped, b.skip(Range{From: b.state.NextSeq, To: head - 1}))
		}
		ex.Released = b.release(ex.Released)
	}
	ex.Released = b.drain(ex.Released)
	b.state.UpdatedAt = now
	ex.State = b.state
	return ex
}

// skip gives up on r, which starts at NextSeq, and remembers it so a late
// arrival is reported Held.
func (b *Buffer[T]) skip(r Range) Range {
	b.state.GapsSkipped += r.Len()
	b.state.NextSeq = r.To + 1
	b.remember(r)
	return r
}

// remember adds r, above every range remembered, to the skip ranges,
// forgetting the oldest beyond maxSkipped.
func (b *Buffer[T]) remember(r Range) {
	b.skipped = append(b.skipped, r)
	if len(b.skipped) > b.maxSkipped {
		b.knownFrom = b.skipped[0].To + 1
		b.skipped = append(b.skipped[:0], b.skipped[1:]...)
	}
}

// NextDeadline is when the oldest waiting item's gap timeout runs out, so a
// caller can set a timer instead of polling Expire.
func (b *Buffer[T]) NextDeadline(timeout time.Duration) (time.Time, bool) {
	if len(b.byArrival) == 0 {
		return time.Time{}, false
	}
	return b.byArrival[0].since.Add(timeout), true
}
