package receipts

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// rank is the strength order written out by hand, so that the expected
// states below do not lean on ReceiptType.Version, which Merge uses.
var rank = map[wamux.ReceiptType]int{
	wamux.ReceiptSent:      0,
	wamux.ReceiptFailed:    1,
	wamux.ReceiptDelivered: 2,
	wamux.ReceiptRead:      3,
}

var receiptTypes = []wamux.ReceiptType{wamux.ReceiptSent, wamux.ReceiptFailed, wamux.ReceiptDelivered, wamux.ReceiptRead}

// genReceipt draws a receipt of one of a few messages. Event times and
// error codes come from small ranges so that ties are common.
func genReceipt(accounts, messages int) *rapid.Generator[wamux.Receipt] {
	return rapid.Custom(func(t *rapid.T) wamux.Receipt {
		return wamux.Receipt{
			AccountID: fmt.Sprintf("acc%d", rapid.IntRange(0, accounts-1).Draw(t, "account")),
			MessageID: fmt.Sprintf("wamid.%d", rapid.IntRange(0, messages-1).Draw(t, "message")),
			Type:      rapid.SampledFrom(receiptTypes).Draw(t, "type"),
			EventTime: t0.Add(time.Duration(rapid.IntRange(0, 5).Draw(t, "event")) * time.Second),
			ErrorCode: rapid.IntRange(0, 2).Draw(t, "code"),
		}
	})
}

// expectedStates picks, for each message, the greatest receipt by sorting
// on (rank, event time, error code) and taking the last.
func expectedStates(rs []wamux.Receipt) map[store.StateKey]store.MessageState {
	byMsg := map[store.StateKey][]wamux.Receipt{}
	for _, r := range rs {
		k := store.StateKey{AccountID: r.AccountID, MessageID: r.MessageID}
		byMsg[k] = append(byMsg[k], r)
	}
	want := map[store.StateKey]store.MessageState{}
	for k, list := range byMsg {
		sort.Slice(list, func(i, j int) bool {
			a, b := list[i], list[j]
			if rank[a.Type] != rank[b.Type] {
				return rank[a.Type] < rank[b.Type]
			}
			if !a.EventTime.Equal(b.EventTime) {
				return a.EventTime.Before(b.EventTime)
			}
			return a.ErrorCode < b.ErrorCode
		})
		top := list[len(list)-1]
		want[k] = store.MessageState{StateKey: k, Type: top.Type, EventTime: top.EventTime, ErrorCode: top.ErrorCode}
	}
	return want
}

// fold merges rs in order into states, with the clock advancing by a
// millisecond per receipt and a window far longer than the whole run.
func fold(t *rapid.T, states map[store.StateKey]store.MessageState, rs []wamux.Receipt, now time.Time) time.Time {
	for _, r := range rs {
		k := store.StateKey{AccountID: r.AccountID, MessageID: r.MessageID}
		var cur *store.MessageState
		if s, ok := states[k]; ok {
			cur = &s
		}
		next, d := Merge(cur, r, now, time.Hour)
		if d == Late {
			t.Fatalf("receipt %+v is Late within the window", r)
		}
		if d == Apply {
			states[k] = next
		}
		now = now.Add(time.Millisecond)
	}
	return now
}

func sameStates(t *rapid.T, got, want map[store.StateKey]store.MessageState) {
	if len(got) != len(want) {
		t.Fatalf("%d merged states, want %d", len(got), len(want))
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Fatalf("no state for %v", k)
		}
		// UpdatedAt records when the last Apply happened, which depends on
		// the order; everything else must not.
		g.UpdatedAt = time.Time{}
		if g != w {
			t.Fatalf("state of %v = %+v, want %+v", k, g, w)
		}
	}
}

// TestMergeConverges is guarantee 4: any permutation with any duplication
// of the same receipts ends in the same state per message, and that state is
// the greatest receipt.
func TestMergeConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rs := rapid.SliceOfN(genReceipt(2, 3), 1, 30).Draw(t, "receipts")
		// Every receipt at least once, some several times, in any order.
		seq := append([]wamux.Receipt(nil), rs...)
		for _, i := range rapid.SliceOfN(rapid.IntRange(0, len(rs)-1), 0, 30).Draw(t, "dups") {
			seq = append(seq, rs[i])
		}
		seq = rapid.Permutation(seq).Draw(t, "order")

		got := map[store.StateKey]store.MessageState{}
		fold(t, got, seq, t0)
		sameStates(t, got, expectedStates(rs))
	})
}

// TestMergeAssociative folds two halves of a sequence separately, then feeds
// the second half's states into the first as receipts: the result is the
// same as folding the whole sequence.
func TestMergeAssociative(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rs := rapid.SliceOfN(genReceipt(1, 2), 1, 20).Draw(t, "receipts")
		cut := rapid.IntRange(0, len(rs)).Draw(t, "cut")

		left, right := map[store.StateKey]store.MessageState{}, map[store.StateKey]store.MessageState{}
		now := fold(t, left, rs[:cut], t0)
		now = fold(t, right, rs[cut:], now)
		var carried []wamux.Receipt
		for _, s := range right {
			carried = append(carried, wamux.Receipt{AccountID: s.AccountID, MessageID: s.MessageID, Type: s.Type, EventTime: s.EventTime, ErrorCode: s.ErrorCode})
		}
		fold(t, left, carried, now)
		sameStates(t, left, expectedStates(rs))
	})
}

// TestMergeDecisions checks each single step against the rule written out
// independently: Apply exactly when the receipt ranks above the state and
// is not late, and only Apply changes anything.
func TestMergeDecisions(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var cur *store.MessageState
		if rapid.Bool().Draw(t, "has state") {
			s := genReceipt(1, 1).Draw(t, "state")
			cur = &store.MessageState{
				StateKey:  store.StateKey{AccountID: s.AccountID, MessageID: s.MessageID},
				Type:      s.Type,
				EventTime: s.EventTime,
				ErrorCode: s.ErrorCode,
				UpdatedAt: t0.Add(time.Duration(rapid.IntRange(0, 600).Draw(t, "updated")) * time.Second),
			}
		}
		r := genReceipt(1, 1).Draw(t, "receipt")
		window := time.Duration(rapid.IntRange(0, 300).Draw(t, "window")) * time.Second
		now := t0.Add(time.Duration(rapid.IntRange(0, 1200).Draw(t, "now")) * time.Second)

		var before store.MessageState
		if cur != nil {
			before = *cur
		}
		next, d := Merge(cur, r, now, window)

		above := cur == nil || rank[r.Type] > rank[cur.Type] ||
			rank[r.Type] == rank[cur.Type] && r.EventTime.After(cur.EventTime) ||
			rank[r.Type] == rank[cur.Type] && r.EventTime.Equal(cur.EventTime) && r.ErrorCode > cur.ErrorCode
		late := above && cur != nil && r.EventTime.Before(cur.EventTime) && now.After(cur.UpdatedAt.Add(window))
		want := Ignore
		switch {
		case late:
			want = Late
		case above:
			want = Apply
		}
		if d != want {
			t.Fatalf("Merge(%+v, %+v, now=%v, window=%v) = %v, want %v", cur, r, now, window, d, want)
		}
		if d != Apply && next != before {
			t.Fatalf("%v changed the state to %+v", d, next)
		}
		if d == Late && rank[r.Type] <= rank[cur.Type] {
			t.Fatalf("Late without a change of type: %+v over %+v", r, cur)
		}
		if d == Apply && (next.Type != r.Type || !next.EventTime.Equal(r.EventTime) || next.ErrorCode != r.ErrorCode || !next.UpdatedAt.Equal(now)) {
			t.Fatalf("Apply produced %+v from %+v", next, r)
		}
	})
}
