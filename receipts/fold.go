package receipts

import (
	"context"
	"fmt"
	"slices"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// merge folds the candidates into the stored states (Merge), recording
// each one's decision, writes the changed states, and then resolves their
// outbound messages; a crash before the log is acknowledged repeats both
// harmlessly, as both only move forward. With both set it stores the
// receipts ins in the same write as the states and returns InsertReceipts'
// answer for them; without, inserted waits for the caller's concurrent
// InsertReceipts of the candidates and returns its answer.
//
// A candidate L3 finds stored is a duplicate (unless remerge: see
// recover), and a duplicate must not change a state: it was merged when
// it was new, and if it did not change the state then (it was late), it
// must not now because the Bloom filter forgot it. L3 answers only with
// the write, so the merge folds every candidate first; when a stored one
// turned out to have changed a state (a late receipt redelivered after a
// restart or 48 h, once its state had changed since), the batch is folded
// again without it and the states it touched are written again. A stored
// receipt that finds no state at all was never merged (a state write lost
// after its insert) and is merged now.
//
// The messages are looked up only once the states are stored. The
// dispatcher, when it records the wamid of a send whose status came first,
// stores the wamid and then reads the state (wamux.MessageStatusFor): with
// each side writing before it reads, at least one sees the other's write,
// so a status always reaches its message.
func (p *Pipeline) merge(ctx context.Context, b *batchRun, both store.ReceiptStateWriter, ins []wamux.Receipt,
	inserted func() ([]bool, error)) ([]bool, error) {
	f := newFolding(b)
	err := p.retry(ctx, "read states", func(ctx context.Context) error {
		var err error
		f.cur, err = p.st.GetStates(ctx, f.skeys)
		return err
	})
	if err != nil {
		return nil, err
	}
	f.fold(nil)
	states := f.changed()
	var fresh []bool
	if both != nil {
		err = p.retry(ctx, "store receipts and states", func(ctx context.Context) error {
			var err error
			fresh, err = both.InsertReceiptsPutStates(ctx, ins, states)
			return err
		})
	} else if len(states) > 0 {
		err = p.retry(ctx, "write states", func(ctx context.Context) error { return p.st.PutStates(ctx, states) })
	}
	if err != nil {
		return nil, fmt.Errorf("receipts: merge: %w", err)
	}
	if !b.remerge {
		if inserted != nil {
			if fresh, err = inserted(); err != nil {
				return nil, err
			}
		}
		if err := p.unmergeStored(ctx, f, fresh); err != nil {
			return nil, err
		}
	}
	if both == nil {
		fresh = nil
	}
	return fresh, p.resolve(ctx, f.resolutions())
}

// folding is the merge of one batch's candidates into the states read for
// their messages.
type folding struct {
	b     *batchRun
	skeys []store.StateKey                      // the candidates' messages, each once
	at    map[store.StateKey]int                // key → its index in skeys
	cur   map[store.StateKey]store.MessageState // the states read
	// entries holds one entry per message, by its index in skeys; a
	// changed one holds its new state, and order lists the changed ones
	// in the order they first changed.
	entries []resolution
	order   []int
	// again lists messages whose state a receipt leaves as it is but whose
	// outbound message it may still have to resolve: a repeat of the
	// state's own receipt (a batch merged before, whose resolution failed
	// or never ran: a crash, a store failure past the retries), or a
	// receipt naming our msg_id in its callback data (the state may have
	// come from an agent's receipt, which carries none). Resolving again is
	// idempotent (forward-only updates).
	again  []int
	listed []bool // by index in skeys: in again already; made on first use
}

func newFolding(b *batchRun) *folding {
	f := &folding{b: b, skeys: make([]store.StateKey, 0, len(b.cand)), at: make(map[store.StateKey]int, len(b.cand))}
	for _, i := range b.cand {
		k := store.StateKey{AccountID: b.batch[i].AccountID, MessageID: b.batch[i].MessageID}
		if _, ok := f.at[k]; !ok {
			f.at[k] = len(f.skeys)
			f.skeys = append(f.skeys, k)
		}
	}
	f.entries = make([]resolution, len(f.skeys))
	return f
}

// fold merges the candidates into the states read, recording each one's
// decision; stored, by position in the candidates (nil: none known),
// marks those L3 found stored.
func (f *folding) fold(stored []bool) {
	clear(f.entries)
	f.order, f.again = f.order[:0], f.again[:0]
	clear(f.listed)
	for n, i := range f.b.cand {
		r := f.b.batch[i].Receipt
		j := f.at[store.StateKey{AccountID: r.AccountID, MessageID: r.MessageID}]
		c := f.state(j)
		next, d := Merge(c, r, f.b.now, f.b.lateWindow)
		// The state's type came from a stored receipt of the same key
		// (message, account, type): r repeats it (L3 keeps the first),
		// whatever its event time or error code says. A receipt L3 found
		// stored is a repeat too (see merge).
		if d == Apply && c != nil && (c.Type == r.Type || stored != nil && stored[n]) {
			d, next = Ignore, *c
		}
		f.b.decisions[i] = d
		if d == Apply {
			if f.entries[j].state.MessageID == "" {
				f.order = append(f.order, j)
			}
			f.entries[j].state, f.entries[j].receipt = next, r
		} else if c != nil && (c.Type == r.Type || r.CallbackData != "") && f.entries[j].state.MessageID == "" {
			f.resolveUnchanged(j, c, r)
		}
		if r.CallbackData != "" && f.entries[j].callback == "" {
			f.entries[j].callback = r.CallbackData
		}
	}
}

// state is the current state of message j in the fold: the one this batch
// applied, else the one read (nil: none).
func (f *folding) state(j int) *store.MessageState {
	if f.entries[j].state.MessageID != "" {
		s := f.entries[j].state
		return &s
	}
	if s, ok := f.cur[f.skeys[j]]; ok {
		return &s
	}
	return nil
}

// resolveUnchanged lists message j for resolution with its state c as it
// is: r repeats c, or does not change it but names our msg_id (a weaker
// or late status after an agent's receipt without callback data), so an
// unknown send learns it was accepted. The receipt that made c, when in
// the batch, gives the resolution its error title.
func (f *folding) resolveUnchanged(j int, c *store.MessageState, r wamux.Receipt) {
	if f.listed == nil {
		f.listed = make([]bool, len(f.skeys))
	}
	if !f.listed[j] {
		f.listed[j] = true
		f.again = append(f.again, j)
	}
	if r.Type == c.Type && r.EventTime.Equal(c.EventTime) && r.ErrorCode == c.ErrorCode {
		f.entries[j].receipt = r
	}
}

// changed lists the states the fold changed, in the order they first
// changed.
func (f *folding) changed() []store.MessageState {
	states := make([]store.MessageState, 0, len(f.order))
	for _, j := range f.order {
		states = append(states, f.entries[j].state)
	}
	return states
}

// resolutions lists the messages to resolve: those whose state changed,
// then those listed again with their state as read.
func (f *folding) resolutions() []*resolution {
	rs := make([]*resolution, 0, len(f.order)+len(f.again))
	for _, j := range f.order {
		rs = append(rs, &f.entries[j])
	}
	for _, j := range f.again {
		if f.entries[j].state.MessageID != "" {
			continue // changed later in the batch: resolved with order
		}
		f.entries[j].state = f.cur[f.skeys[j]]
		rs = append(rs, &f.entries[j])
	}
	return rs
}

// unmergeStored undoes what candidates L3 found stored did to states they
// were merged into (merge): it folds the batch again with them marked
// stored and writes every state the first fold changed as the second one
// leaves it. It costs nothing unless such a candidate was applied.
func (p *Pipeline) unmergeStored(ctx context.Context, f *folding, fresh []bool) error {
	cand := f.b.cand
	var stored []bool
	for n, i := range cand {
		if !fresh[n] && f.b.decisions[i] == Apply {
			stored = make([]bool, len(cand))
			break
		}
	}
	if stored == nil {
		return nil
	}
	for n := range cand {
		stored[n] = !fresh[n]
	}
	touched := slices.Clone(f.order)
	f.fold(stored)
	// The second fold changes a subset of what the first did: it only
	// leaves out Applies. A state it no longer changes goes back to the
	// one read, which exists (a stored receipt changes only an existing
	// state).
	states := make([]store.MessageState, 0, len(touched))
	for _, j := range touched {
		if f.entries[j].state.MessageID != "" {
			states = append(states, f.entries[j].state)
		} else {
			states = append(states, f.cur[f.skeys[j]])
		}
	}
	if err := p.retry(ctx, "write states", func(ctx context.Context) error { return p.st.PutStates(ctx, states) }); err != nil {
		return fmt.Errorf("receipts: merge: undo a stored receipt: %w", err)
	}
	return nil
}
