package receipts

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/wamux/wamux"
)

// len is how many ids the set holds.
func (s *idSet) len() int { return len(s.ents) - 1 }

// The id set behaves as the plainest LRU there is: a slice, most recent
// last, of at most size ids, each with whether a copy carrying callback
// data was added while it was held. Few distinct ids over a small size
// make hits, evictions, table growth and probe clusters (whose deletions
// shift entries back) all common.
func TestIDSetIsAnLRU(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		size := rapid.IntRange(1, 40).Draw(t, "size")
		s := newIDSet(size)
		var model []ReceiptID
		withCB := map[ReceiptID]bool{} // of the ids in model
		types := []wamux.ReceiptType{wamux.ReceiptSent, wamux.ReceiptRead}
		ops := rapid.IntRange(1, 400).Draw(t, "ops")
		for range ops {
			id := ReceiptID{
				MessageID: fmt.Sprint("m", rapid.IntRange(0, 2*size+3).Draw(t, "msg")),
				Type:      types[rapid.IntRange(0, 1).Draw(t, "type")],
			}
			cb := rapid.Bool().Draw(t, "callback")
			at := slices.Index(model, id)
			if at >= 0 {
				model = append(slices.Delete(model, at, at+1), id)
			}
			if rapid.Bool().Draw(t, "add") {
				s.add(id, cb)
				if at < 0 {
					model = append(model, id)
					withCB[id] = false
					if len(model) > size {
						delete(withCB, model[0])
						model = model[1:]
					}
				}
				withCB[id] = withCB[id] || cb
			} else if got, want := s.get(id, cb), at >= 0 && (!cb || withCB[id]); got != want {
				t.Fatalf("get(%v, callback %v) = %v, want %v (held: %v, with callback: %v)", id, cb, got, want, model, withCB)
			}
			if s.len() != len(model) {
				t.Fatalf("holds %d ids, want %d", s.len(), len(model))
			}
		}
		// Everything the model holds is found, and in its order: the
		// least recent goes first.
		for _, id := range model {
			if !s.get(id, false) || s.get(id, true) != withCB[id] {
				t.Fatalf("%v lost or its callback flag (want %v); held: %v", id, withCB[id], model)
			}
		}
		if len(model) == size {
			s.add(ReceiptID{MessageID: "new"}, false)
			if s.get(model[0], false) {
				t.Fatalf("%v, the least recent, kept past the size", model[0])
			}
		}
	})
}

// A probe cluster that wraps around the end of the table: removing its
// first entry must shift back the entries after the wrap, or those whose
// home is before the hole are no longer found.
func TestIDSetRemovesAcrossTheWrap(t *testing.T) {
	s := newIDSet(5) // 16 slots: no growth below 8 entries
	mask := uint64(len(s.table) - 1)
	pick := func(home uint64, n int, skip map[string]bool) []ReceiptID {
		var ids []ReceiptID
		for i := 0; len(ids) < n; i++ {
			id := ReceiptID{MessageID: fmt.Sprint("w", i), Type: wamux.ReceiptRead}
			if !skip[id.MessageID] && s.hash(id)&mask == home {
				ids = append(ids, id)
				skip[id.MessageID] = true
			}
		}
		return ids
	}
	used := map[string]bool{}
	last := pick(mask, 3, used) // slots 15, 0, 1
	first := pick(0, 2, used)   // slots 2, 3
	other := pick(8, 1, used)
	for _, id := range append(last, first...) {
		s.add(id, false)
	}
	if len(s.table) != 16 {
		t.Fatalf("table grew to %d slots; the test needs 16", len(s.table))
	}
	s.add(other[0], false) // evicts last[0], at slot 15
	if s.get(last[0], false) {
		t.Fatal("the least recent id was not evicted")
	}
	for _, id := range append(last[1:], first...) {
		if !s.get(id, false) {
			t.Fatalf("%v not found after a removal across the wrap", id)
		}
	}
}
