package receipts

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// process takes one batch of logged receipts of one partition (part -1:
// recovery at Start) through L2, L3, the merge and message resolution;
// when it returns nil all of that is durable and the caller acknowledges
// the batch in the log (ack). remerge merges receipts the dedup layers call
// stored (see recover). Store failures are retried (bounded); an error
// means the batch is still in the log and may be processed again.
func (p *Pipeline) process(ctx context.Context, part int, batch []store.LoggedReceipt, remerge bool) error {
	now := p.now().UTC()
	lateWindow := p.lateWindow()
	keys := make([]store.ReceiptKey, len(batch))
	var callback []bool // made at the first receipt with callback data
	oldest := batch[0].ReceivedAt
	for i := range batch {
		keys[i] = keyOf(batch[i].Receipt)
		if batch[i].CallbackData != "" {
			if callback == nil {
				callback = make([]bool, len(batch))
			}
			callback[i] = true
		}
		if batch[i].ReceivedAt.Before(oldest) {
			oldest = batch[i].ReceivedAt
		}
	}
	if part >= 0 {
		p.parts[part].lag.Set(max(0, time.Since(oldest).Seconds()))
	}

	dupLayer := make([]string, len(batch))
	// L2: the Bloom filter; its hits are confirmed against the store.
	if !remerge {
		var dup []bool
		var st DedupStats
		err := p.retry(ctx, "dedup receipts", func(ctx context.Context) error {
			var err error
			dup, st, err = p.bloom.Dedup(ctx, keys, callback, p.st)
			return err
		})
		if err != nil {
			return err
		}
		layer := LayerBloom
		if st.Hits == 0 && st.Checked > 0 { // Bloom off: every key was looked up
			layer = LayerStore
		}
		for i, d := range dup {
			if d {
				dupLayer[i] = layer
			}
		}
		// Repeats inside the batch are found before the filter is asked.
		p.countDedup(LayerBatch, st.Repeats)
		p.countDedup(layer, st.Confirmed)
		p.c.fp.Add(int64(st.FalsePositives))
		p.m.falsePositives.Add(float64(st.FalsePositives))
		if st.Repeats > 0 {
			first := make(copies, len(keys))
			for i, k := range keys {
				if first.repeat(k, callback != nil && callback[i]) {
					dupLayer[i] = LayerBatch
				}
			}
		}
	}

	// L3 and the merge run side by side, so their writes share a commit:
	// the store's unique key decides what is new for good, while the
	// merge already folds in every candidate. A candidate L3 then finds
	// stored (the Bloom filter forgets across restarts and after 48 h) was
	// merged before, and merging it again changes nothing: the state is a
	// maximum that already holds it — unless it was late then, and the
	// state has changed since; merge repairs that rare case once L3 has
	// answered. Only its audit row would repeat, so late receipts are
	// written once L3 has answered, for new ones alone.
	var cand []int // indexes into batch
	for i := range batch {
		if dupLayer[i] == "" {
			cand = append(cand, i)
		}
	}
	if len(cand) == 0 {
		return nil
	}
	candRs := make([]wamux.Receipt, len(cand))
	for j, i := range cand {
		candRs[j] = batch[i].Receipt
	}
	var fresh []bool
	decisions := make([]Decision, len(batch))
	if both, ok := p.st.(store.ReceiptStateWriter); ok {
		// The store writes receipts and states together for less: the
		// merge stores the candidates with the states they make.
		var err error
		if fresh, err = p.merge(ctx, batch, cand, decisions, now, lateWindow, remerge, both, candRs, nil); err != nil {
			return err
		}
	} else {
		insDone := make(chan struct{})
		var insErr error
		go func() {
			defer close(insDone)
			insErr = p.retry(ctx, "insert receipts", func(ctx context.Context) error {
				var err error
				fresh, err = p.st.InsertReceipts(ctx, candRs)
				return err
			})
		}()
		inserted := func() ([]bool, error) {
			<-insDone
			return fresh, insErr
		}
		_, mergeErr := p.merge(ctx, batch, cand, decisions, now, lateWindow, remerge, nil, nil, inserted)
		if _, err := inserted(); err != nil {
			return err
		}
		if mergeErr != nil {
			return mergeErr
		}
	}

	var late []store.LateReceipt
	l3 := 0
	for j, i := range cand {
		if !fresh[j] && !remerge {
			dupLayer[i] = LayerStore
			l3++
			continue
		}
		switch decisions[i] {
		case Apply:
			p.c.applied.Add(1)
		case Late:
			late = append(late, store.LateReceipt{Receipt: batch[i].Receipt, Reason: LateReason, RecordedAt: now})
			p.c.late.Add(1)
			p.m.late.WithLabelValues(batch[i].AccountID).Inc()
		default:
			p.c.ignored.Add(1)
		}
		p.m.merged.WithLabelValues(decisions[i].String()).Inc()
	}
	p.countDedup(LayerStore, l3)
	if err := p.retry(ctx, "audit late receipts", func(ctx context.Context) error { return p.st.AddLateReceipts(ctx, late) }); err != nil {
		return err
	}

	done := p.now()
	for _, i := range cand {
		if dupLayer[i] == "" {
			p.m.latency.Observe(max(0, done.Sub(batch[i].ReceivedAt).Seconds()))
		}
	}
	if p.cfg.Observer != nil {
		obs := make([]Processed, len(batch))
		for i := range batch {
			d := decisions[i]
			if dupLayer[i] != "" {
				d = Ignore
			}
			obs[i] = Processed{Key: keys[i], Duplicate: dupLayer[i], Decision: d, Latency: done.Sub(batch[i].ReceivedAt)}
		}
		p.cfg.Observer(obs)
	}
	return nil
}

func (p *Pipeline) countDedup(layer string, n int) {
	if n == 0 {
		return
	}
	switch layer {
	case LayerBatch:
		p.c.batch.Add(int64(n))
	case LayerLRU:
		p.c.lru.Add(int64(n))
	case LayerBloom:
		p.c.bloom.Add(int64(n))
	case LayerStore:
		p.c.store.Add(int64(n))
	}
	p.m.dedup.WithLabelValues(layer).Add(float64(n))
}

func (p *Pipeline) lateWindow() time.Duration {
	if p.set == nil {
		if p.cfg.LateWindow > 0 {
			return p.cfg.LateWindow
		}
		return 5 * time.Minute
	}
	return p.set.Current().LateWindow
}

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
// turned out to have changed a state (rare: a late receipt redelivered
// after a restart or 48 h, once its state had changed since), the batch is
// folded again without it and the states it touched are written again.
// A stored receipt that finds no state at all was never merged (a state
// write lost after its insert) and is merged now.
//
// The messages are looked up only once the states are stored. The
// dispatcher, when it records the wamid of a send whose status came first,
// stores the wamid and then reads the state (wamux.MessageStatusFor): with each
// side writing before it reads, at least one sees the other's write. A
// lookup that overlapped the state write could miss the wamid while the
// dispatcher's read missed the state, and the status would never reach
// the message (TestStatusMeetsWAMIDRecordedMeanwhile). The order cost no
// throughput in bench receipts (docs/BENCHMARKS.md, fifteenth session).
func (p *Pipeline) merge(ctx context.Context, batch []store.LoggedReceipt, idx []int, decisions []Decision,
	now time.Time, lateWindow time.Duration, remerge bool, both store.ReceiptStateWriter, ins []wamux.Receipt,
	inserted func() ([]bool, error)) ([]bool, error) {
	skeys := make([]store.StateKey, 0, len(idx))
	at := make(map[store.StateKey]int, len(idx)) // key → its index in skeys
	for _, i := range idx {
		k := store.StateKey{AccountID: batch[i].AccountID, MessageID: batch[i].MessageID}
		if _, ok := at[k]; !ok {
			at[k] = len(skeys)
			skeys = append(skeys, k)
		}
	}
	var cur map[store.StateKey]store.MessageState
	err := p.retry(ctx, "read states", func(ctx context.Context) error {
		var err error
		cur, err = p.st.GetStates(ctx, skeys)
		return err
	})
	if err != nil {
		return nil, err
	}
	// One entry per message, by its index in skeys; a changed one holds
	// its new state, and order lists the changed ones in the order they
	// first changed.
	entries := make([]resolution, len(skeys))
	var order []int
	// again lists messages whose state a receipt leaves as it is but whose
	// outbound message it may still have to resolve: a repeat of the
	// state's own receipt (a batch merged before, whose resolution failed
	// or never ran: a crash, a store failure past the retries), or a
	// receipt naming our msg_id in its callback data (the state may have
	// come from an agent's receipt, which carries none). Resolving again is
	// idempotent (forward-only updates).
	var again []int
	var listed []bool // by j: in again already; made on first use
	// fold merges the candidates into the states read; stored, by position
	// in idx (nil: none known), marks those L3 found stored.
	fold := func(stored []bool) {
		clear(entries)
		order, again = order[:0], again[:0]
		clear(listed)
		for n, i := range idx {
			r := batch[i].Receipt
			k := store.StateKey{AccountID: r.AccountID, MessageID: r.MessageID}
			j := at[k]
			var c *store.MessageState
			if entries[j].state.MessageID != "" {
				s := entries[j].state
				c = &s
			} else if s, ok := cur[k]; ok {
				c = &s
			}
			next, d := Merge(c, r, now, lateWindow)
			// The state's type came from a stored receipt of the same key
			// (message, account, type): r repeats it (L3 keeps the first),
			// whatever its event time or error code says. A receipt L3
			// found stored is a repeat too (see above).
			if d == Apply && c != nil && (c.Type == r.Type || stored != nil && stored[n]) {
				d, next = Ignore, *c
			}
			decisions[i] = d
			if d == Apply {
				if entries[j].state.MessageID == "" {
					order = append(order, j)
				}
				entries[j].state, entries[j].receipt = next, r
			} else if c != nil && (c.Type == r.Type || r.CallbackData != "") && entries[j].state.MessageID == "" {
				// A repeat, or a receipt that does not change the state but
				// names our msg_id (a weaker or late status after an agent's
				// receipt without callback data): resolve the message with
				// the state as it is, so an unknown send learns it was
				// accepted. Until an Apply in this batch sets
				// entries[j].state, the state is c; the receipt that made
				// it, when in the batch, gives the resolution its error
				// title.
				if listed == nil {
					listed = make([]bool, len(skeys))
				}
				if !listed[j] {
					listed[j] = true
					again = append(again, j)
				}
				if r.Type == c.Type && r.EventTime.Equal(c.EventTime) && r.ErrorCode == c.ErrorCode {
					entries[j].receipt = r
				}
			}
			if r.CallbackData != "" && entries[j].callback == "" {
				entries[j].callback = r.CallbackData
			}
		}
	}
	changed := func() []store.MessageState {
		states := make([]store.MessageState, 0, len(order))
		for _, j := range order {
			states = append(states, entries[j].state)
		}
		return states
	}

	fold(nil)
	states := changed()
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
	if !remerge {
		if inserted != nil {
			if fresh, err = inserted(); err != nil {
				return nil, err
			}
		}
		if err := p.unmergeStored(ctx, idx, decisions, fresh, cur, skeys, entries, &order, fold); err != nil {
			return nil, err
		}
	}

	resolve := make([]*resolution, 0, len(order)+len(again))
	for _, j := range order {
		resolve = append(resolve, &entries[j])
	}
	for _, j := range again {
		if entries[j].state.MessageID != "" {
			continue // changed later in the batch: resolved with order
		}
		entries[j].state = cur[skeys[j]]
		resolve = append(resolve, &entries[j])
	}
	if both != nil {
		return fresh, p.resolve(ctx, resolve)
	}
	return nil, p.resolve(ctx, resolve)
}

// unmergeStored undoes what candidates L3 found stored did to states they
// were merged into (merge): it folds the batch again with them marked
// stored and writes every state the first fold changed as the second one
// leaves it. It costs nothing unless such a candidate was applied.
func (p *Pipeline) unmergeStored(ctx context.Context, idx []int, decisions []Decision, fresh []bool,
	cur map[store.StateKey]store.MessageState, skeys []store.StateKey, entries []resolution, order *[]int,
	fold func(stored []bool)) error {
	var stored []bool
	for n, i := range idx {
		if !fresh[n] && decisions[i] == Apply {
			stored = make([]bool, len(idx))
			break
		}
	}
	if stored == nil {
		return nil
	}
	for n := range idx {
		stored[n] = !fresh[n]
	}
	touched := slices.Clone(*order)
	fold(stored)
	// The second fold changes a subset of what the first did: it only
	// leaves out Applies. A state it no longer changes goes back to the
	// one read, which exists (a stored receipt changes only an existing
	// state).
	states := make([]store.MessageState, 0, len(touched))
	for _, j := range touched {
		if entries[j].state.MessageID != "" {
			states = append(states, entries[j].state)
		} else {
			states = append(states, cur[skeys[j]])
		}
	}
	if err := p.retry(ctx, "write states", func(ctx context.Context) error { return p.st.PutStates(ctx, states) }); err != nil {
		return fmt.Errorf("receipts: merge: undo a stored receipt: %w", err)
	}
	return nil
}

// ack deletes a processed batch from the log and reports how many entries
// were still there. Receipts an earlier run left (ids up to backlogUpTo)
// are acknowledged apart and not reported: Appended and Processed count
// this run's receipts only, as recover does.
func (p *Pipeline) ack(ctx context.Context, batch []store.LoggedReceipt) (int, error) {
	upTo := p.backlogUpTo.Load()
	var ids, old []int64
	for i := range batch {
		if batch[i].ID <= upTo {
			old = append(old, batch[i].ID)
		} else {
			ids = append(ids, batch[i].ID)
		}
	}
	if len(old) > 0 {
		if _, err := p.ackIDs(ctx, old); err != nil {
			return 0, err
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	return p.ackIDs(ctx, ids)
}

func (p *Pipeline) ackIDs(ctx context.Context, ids []int64) (int, error) {
	var n int
	err := p.retry(ctx, "acknowledge receipt log", func(ctx context.Context) error {
		var err error
		n, err = p.st.AckReceiptLog(ctx, ids)
		return err
	})
	return n, err
}
