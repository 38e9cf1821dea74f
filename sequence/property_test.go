package sequence_test

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/wamux/wamux/sequence"
)

// model is the reference behaviour of one buffer, written as plainly as
// possible: sets and loops over small seqs.
type model struct {
	next     int64
	released map[int64]bool
	skipped  map[int64]bool
	waiting  map[int64]time.Time
}

func newModel() *model {
	return &model{next: 1, released: map[int64]bool{}, skipped: map[int64]bool{}, waiting: map[int64]time.Time{}}
}

func (m *model) drain(out []int64) []int64 {
	for {
		if _, ok := m.waiting[m.next]; !ok {
			return out
		}
		delete(m.waiting, m.next)
		m.released[m.next] = true
		out = append(out, m.next)
		m.next++
	}
}

func (m *model) offer(now time.Time, seq int64) (sequence.Outcome, []int64) {
	_, waiting := m.waiting[seq]
	switch {
	case m.released[seq] || waiting:
		return sequence.Duplicate, nil
	case m.skipped[seq]:
		return sequence.Held, nil
	case seq == m.next:
		m.released[seq] = true
		m.next++
		return sequence.Released, m.drain([]int64{seq})
	}
	m.waiting[seq] = now
	return sequence.Waiting, nil
}

func (m *model) expire(now time.Time, timeout time.Duration) (released []int64, skipped []int64) {
	target := int64(0)
	for s, since := range m.waiting {
		if now.Sub(since) >= timeout {
			target = max(target, s)
		}
	}
	for ; m.next <= target; m.next++ {
		if _, ok := m.waiting[m.next]; ok {
			delete(m.waiting, m.next)
			m.released[m.next] = true
			released = append(released, m.next)
		} else {
			m.skipped[m.next] = true
			skipped = append(skipped, m.next)
		}
	}
	return m.drain(released), skipped
}

func expand(rs []sequence.Range) []int64 {
	var out []int64
	for _, r := range rs {
		for s := r.From; s <= r.To; s++ {
			out = append(out, s)
		}
	}
	return out
}

// Without timeouts, any permutation of 1..N with any duplicates mixed in
// comes out as 1..N, each exactly once, in order.
func TestPropertyPermutationReleasedOnceInOrder(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 100).Draw(rt, "n")
		all := make([]int64, n)
		for i := range all {
			all[i] = int64(i + 1)
		}
		offers := rapid.Permutation(all).Draw(rt, "perm")
		for _, d := range rapid.SliceOfN(rapid.Int64Range(1, int64(n)), 0, n).Draw(rt, "dups") {
			at := rapid.IntRange(0, len(offers)).Draw(rt, "at")
			offers = slices.Insert(offers, at, d)
		}

		b := sequence.NewBuffer[string]("a", 0)
		var released []int64
		seen := map[int64]bool{}
		for _, s := range offers {
			res, err := b.Offer(t0, s, itemOf(s))
			if err != nil {
				rt.Fatalf("Offer(%d): %v", s, err)
			}
			if seen[s] && res.Outcome != sequence.Duplicate {
				rt.Fatalf("repeat of %d: %v, want duplicate", s, res.Outcome)
			}
			if !seen[s] && res.Outcome != sequence.Released && res.Outcome != sequence.Waiting {
				rt.Fatalf("first offer of %d: %v, want released or waiting", s, res.Outcome)
			}
			seen[s] = true
			released = append(released, seqs(res.Released)...)
		}
		if !slices.Equal(released, all) {
			rt.Fatalf("released %v, want 1..%d in order", released, n)
		}
		if st := b.State(); st.NextSeq != int64(n+1) || st.GapsSkipped != 0 || b.Len() != 0 {
			rt.Fatalf("end state %+v with %d waiting, want NextSeq %d, nothing skipped or waiting", st, b.Len(), n+1)
		}
	})
}

// With the clock moving past the gap timeout, the buffer matches the model
// and keeps the guarantee's invariants at every step.
func TestPropertyWithTimeouts(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.Int64Range(1, 40).Draw(rt, "n")
		b := sequence.NewBuffer[string]("a", 0)
		m := newModel()
		now := t0
		var released []int64
		fate := map[int64]sequence.Outcome{} // released or held, per seq

		record := func(got []int64) {
			for _, s := range got {
				if len(released) > 0 && s <= released[len(released)-1] {
					rt.Fatalf("released %d after %d: not strictly increasing", s, released[len(released)-1])
				}
				if f, ok := fate[s]; ok {
					rt.Fatalf("seq %d released, but it was already %v", s, f)
				}
				fate[s] = sequence.Released
				released = append(released, s)
			}
		}

		steps := rapid.IntRange(1, 150).Draw(rt, "steps")
		for i := 0; i <= steps; i++ {
			op := rapid.IntRange(0, 5).Draw(rt, "op")
			if i == steps {
				op, now = 5, now.Add(2*timeout) // finally, let everything expire
			}
			switch op {
			case 0, 1, 2:
				s := rapid.Int64Range(1, n).Draw(rt, "seq")
				res, err := b.Offer(now, s, itemOf(s))
				if err != nil {
					rt.Fatalf("Offer(%d): %v", s, err)
				}
				wantOutcome, wantReleased := m.offer(now, s)
				if res.Outcome != wantOutcome || !slices.Equal(seqs(res.Released), wantReleased) {
					rt.Fatalf("Offer(%d) = %v releasing %v; model says %v releasing %v", s, res.Outcome, seqs(res.Released), wantOutcome, wantReleased)
				}
				if res.Outcome == sequence.Held {
					if fate[s] == sequence.Released {
						rt.Fatalf("seq %d held after it was released", s)
					}
					fate[s] = sequence.Held
				}
				record(seqs(res.Released))
			case 3, 4:
				now = now.Add(time.Duration(rapid.Int64Range(0, int64(2*timeout)).Draw(rt, "dt")))
			case 5:
				ex := b.Expire(now, timeout)
				wantReleased, wantSkipped := m.expire(now, timeout)
				if !slices.Equal(seqs(ex.Released), wantReleased) || !slices.Equal(expand(ex.Skipped), wantSkipped) {
					rt.Fatalf("Expire = released %v skipped %v; model says %v and %v", seqs(ex.Released), expand(ex.Skipped), wantReleased, wantSkipped)
				}
				record(seqs(ex.Released))
				for s, since := range m.waiting {
					if now.Sub(since) >= timeout {
						rt.Fatalf("seq %d still waiting %v after Expire, past the timeout", s, now.Sub(since))
					}
				}
			}
			st := b.State()
			if st.NextSeq != m.next || st.GapsSkipped != int64(len(m.skipped)) || b.Len() != len(m.waiting) {
				rt.Fatalf("state %+v with %d waiting; model: next %d, %d skipped, %d waiting", st, b.Len(), m.next, len(m.skipped), len(m.waiting))
			}
		}
		// Every seq below NextSeq was released or skipped, never both, and
		// every offered seq ended released or held.
		for s := int64(1); s < m.next; s++ {
			if m.released[s] == m.skipped[s] {
				rt.Fatalf("seq %d: released %v, skipped %v; want exactly one", s, m.released[s], m.skipped[s])
			}
		}
		for s, f := range fate {
			if f == sequence.Held && !m.skipped[s] {
				rt.Fatalf("seq %d held but never skipped", s)
			}
		}
		if b.Len() != 0 {
			rt.Fatalf("%d items still waiting after every timeout ran out", b.Len())
		}
	})
}

// A buffer restored from its state and waiting items behaves like the one
// that never restarted. The only difference is what it cannot know: seqs
// below the restored NextSeq come back Late instead of Held or Duplicate.
func TestPropertyRestoreBehavesTheSame(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.Int64Range(1, 30).Draw(rt, "n")
		steps := rapid.IntRange(1, 120).Draw(rt, "steps")
		restartAt := rapid.IntRange(0, steps).Draw(rt, "restartAt")

		a := sequence.NewBuffer[string]("a", 0)
		var b *sequence.Buffer[string]
		waitingSince := map[int64]time.Time{}
		var restoredNext int64
		now := t0
		for i := range steps {
			if i == restartAt {
				var pending []sequence.Pending[string]
				for s, since := range waitingSince {
					pending = append(pending, sequence.Pending[string]{Seq: s, Item: itemOf(s), Since: since})
				}
				var r sequence.Restored[string]
				var err error
				b, r, err = sequence.RestoreBuffer(a.State(), pending, 0)
				if err != nil || len(r.Released) > 0 || len(r.Rejected) > 0 {
					rt.Fatalf("RestoreBuffer = %+v, %v; want every item waiting again", r, err)
				}
				restoredNext = a.State().NextSeq
			}
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0, 1:
				s := rapid.Int64Range(1, n).Draw(rt, "seq")
				ra, _ := a.Offer(now, s, itemOf(s))
				if ra.Outcome == sequence.Waiting {
					waitingSince[s] = now
				}
				for _, e := range ra.Released {
					delete(waitingSince, e.Seq)
				}
				if b == nil {
					continue
				}
				rb, _ := b.Offer(now, s, itemOf(s))
				want := ra.Outcome
				if s < restoredNext && (want == sequence.Held || want == sequence.Duplicate) {
					want = sequence.Late
				}
				if rb.Outcome != want || !slices.Equal(ra.Released, rb.Released) {
					rt.Fatalf("Offer(%d): restored buffer %v releasing %v, original %v releasing %v", s, rb.Outcome, seqs(rb.Released), ra.Outcome, seqs(ra.Released))
				}
			case 2:
				now = now.Add(time.Duration(rapid.Int64Range(0, int64(timeout)).Draw(rt, "dt")))
			case 3:
				ea := a.Expire(now, timeout)
				for _, e := range ea.Released {
					delete(waitingSince, e.Seq)
				}
				if b == nil {
					continue
				}
				eb := b.Expire(now, timeout)
				if !slices.Equal(ea.Released, eb.Released) || !slices.Equal(ea.Skipped, eb.Skipped) {
					rt.Fatalf("Expire: restored buffer released %v skipped %v, original %v and %v", seqs(eb.Released), eb.Skipped, seqs(ea.Released), ea.Skipped)
				}
			}
			if b != nil && (b.State().NextSeq != a.State().NextSeq || b.State().GapsSkipped != a.State().GapsSkipped || b.Len() != a.Len()) {
				rt.Fatalf("restored state %+v (%d waiting), original %+v (%d waiting)", b.State(), b.Len(), a.State(), a.Len())
			}
		}
	})
}

// pass is the model of Buffer.Pass: seq went out while ordering was off.
// The seqs it jumps over count as given up (an arrival is held) but not as
// gaps skipped: nobody waited for them.
func (m *model) pass(seq int64) {
	if seq < m.next {
		return
	}
	for ; m.next < seq; m.next++ {
		m.skipped[m.next] = true
	}
	m.released[seq] = true
	m.next = seq + 1
}

// With the ordering switch toggled at random (off: the worker flushes what
// waits, then every seq passes; on: seqs are offered), and a skip memory
// of a few ranges, the buffer still matches the model, except that a seq
// whose fate it has forgotten comes back Late, which only ever stands for
// Held or Duplicate. Seqs leave in increasing order while ordering is on,
// and the gaps counted are only the ones Expire gave up on.
func TestPropertyOrderingSwitchAndBoundedMemory(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.Int64Range(1, 40).Draw(rt, "n")
		maxSkipped := rapid.IntRange(1, 4).Draw(rt, "maxSkipped")
		b := sequence.NewBuffer[string]("a", maxSkipped)
		m := newModel()
		now := t0
		ordering := true
		counted := 0 // seqs Expire skipped
		steps := rapid.IntRange(1, 150).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0, 1, 2:
				s := rapid.Int64Range(1, n).Draw(rt, "seq")
				if !ordering {
					changed, err := b.Pass(now, s)
					if err != nil {
						rt.Fatalf("Pass(%d): %v", s, err)
					}
					if want := s >= m.next; changed != want {
						rt.Fatalf("Pass(%d) changed %v, want %v (next %d)", s, changed, want, m.next)
					}
					m.pass(s)
					break
				}
				res, err := b.Offer(now, s, itemOf(s))
				if err != nil {
					rt.Fatalf("Offer(%d): %v", s, err)
				}
				wantOutcome, wantReleased := m.offer(now, s)
				got := res.Outcome
				if got == sequence.Late && (wantOutcome == sequence.Held || wantOutcome == sequence.Duplicate) && s < m.next {
					got = wantOutcome
				}
				if got != wantOutcome || !slices.Equal(seqs(res.Released), wantReleased) {
					rt.Fatalf("Offer(%d) = %v releasing %v; model says %v releasing %v", s, res.Outcome, seqs(res.Released), wantOutcome, wantReleased)
				}
				if !slices.IsSorted(wantReleased) {
					rt.Fatalf("released %v out of order", wantReleased)
				}
			case 3:
				now = now.Add(time.Duration(rapid.Int64Range(0, int64(2*timeout)).Draw(rt, "dt")))
			case 4:
				ex := b.Expire(now, timeout)
				wantReleased, wantSkipped := m.expire(now, timeout)
				if !slices.Equal(seqs(ex.Released), wantReleased) || !slices.Equal(expand(ex.Skipped), wantSkipped) {
					rt.Fatalf("Expire = released %v skipped %v; model says %v and %v", seqs(ex.Released), expand(ex.Skipped), wantReleased, wantSkipped)
				}
				counted += len(wantSkipped)
			case 5:
				ordering = !ordering
				if !ordering {
					// What the worker does when ordering goes off: every
					// waiting item is released at once.
					later := now.Add(timeout + time.Hour)
					ex := b.Expire(later, timeout)
					wantReleased, wantSkipped := m.expire(later, timeout)
					if !slices.Equal(seqs(ex.Released), wantReleased) || !slices.Equal(expand(ex.Skipped), wantSkipped) {
						rt.Fatalf("flush = released %v skipped %v; model says %v and %v", seqs(ex.Released), expand(ex.Skipped), wantReleased, wantSkipped)
					}
					counted += len(wantSkipped)
					if b.Len() != 0 {
						rt.Fatalf("%d items still waiting after the flush", b.Len())
					}
				}
			}
			st := b.State()
			if st.NextSeq != m.next || st.GapsSkipped != int64(counted) || b.Len() != len(m.waiting) {
				rt.Fatalf("state %+v with %d waiting; model: next %d, %d counted, %d waiting", st, b.Len(), m.next, counted, len(m.waiting))
			}
		}
		for s := int64(1); s < m.next; s++ {
			if m.released[s] == m.skipped[s] {
				rt.Fatalf("seq %d: released %v, skipped %v; want exactly one", s, m.released[s], m.skipped[s])
			}
		}
	})
}
