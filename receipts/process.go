package receipts

import (
	"context"
	"fmt"
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
	oldest := batch[0].ReceivedAt
	for i := range batch {
		keys[i] = keyOf(batch[i].Receipt)
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
			dup, st, err = p.bloom.Dedup(ctx, keys, p.st)
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
			first := make(map[store.ReceiptKey]struct{}, len(keys))
			for i, k := range keys {
				if _, ok := first[k]; ok {
					dupLayer[i] = LayerBatch
				}
				first[k] = struct{}{}
			}
		}
	}

	// L3: the store's unique key decides what is new for good.
	var cand []wamux.Receipt
	var candIdx []int
	for i := range batch {
		if dupLayer[i] == "" {
			cand = append(cand, batch[i].Receipt)
			candIdx = append(candIdx, i)
		}
	}
	var fresh []bool
	if len(cand) > 0 {
		err := p.retry(ctx, "insert receipts", func(ctx context.Context) error {
			var err error
			fresh, err = p.st.InsertReceipts(ctx, cand)
			return err
		})
		if err != nil {
			return err
		}
	}
	var merge []int // indexes into batch
	l3 := 0
	for j, i := range candIdx {
		switch {
		case fresh[j] || remerge:
			merge = append(merge, i)
		default:
			dupLayer[i] = LayerStore
			l3++
		}
	}
	p.countDedup(LayerStore, l3)

	decisions := make([]Decision, len(batch))
	out, err := p.merge(ctx, batch, merge, decisions, now, lateWindow)
	if err != nil {
		return err
	}
	if err := p.resolve(ctx, out.resolve); err != nil {
		return err
	}

	done := p.now()
	for _, i := range merge {
		p.m.latency.Observe(max(0, done.Sub(batch[i].ReceivedAt).Seconds()))
	}
	if p.cfg.Observer != nil {
		obs := make([]Processed, len(batch))
		for i := range batch {
			obs[i] = Processed{Key: keys[i], Duplicate: dupLayer[i], Decision: decisions[i], Latency: done.Sub(batch[i].ReceivedAt)}
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

// mergeOutcome is what a batch's merge changed.
type mergeOutcome struct {
	resolve []resolution
}

// merge folds the new receipts into the stored states (Merge), then
// writes the changed states and the late receipts.
func (p *Pipeline) merge(ctx context.Context, batch []store.LoggedReceipt, idx []int, decisions []Decision,
	now time.Time, lateWindow time.Duration) (mergeOutcome, error) {
	if len(idx) == 0 {
		return mergeOutcome{}, nil
	}
	skeys := make([]store.StateKey, 0, len(idx))
	seen := make(map[store.StateKey]bool, len(idx))
	for _, i := range idx {
		k := store.StateKey{AccountID: batch[i].AccountID, MessageID: batch[i].MessageID}
		if !seen[k] {
			seen[k] = true
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
		return mergeOutcome{}, err
	}
	changed := make(map[store.StateKey]*resolution)
	var order []store.StateKey
	var late []store.LateReceipt
	callbacks := make(map[store.StateKey]string)
	for _, i := range idx {
		r := batch[i].Receipt
		k := store.StateKey{AccountID: r.AccountID, MessageID: r.MessageID}
		var c *store.MessageState
		if s, ok := cur[k]; ok {
			c = &s
		}
		next, d := Merge(c, r, now, lateWindow)
		decisions[i] = d
		switch d {
		case Apply:
			cur[k] = next
			res, ok := changed[k]
			if !ok {
				res = &resolution{}
				changed[k] = res
				order = append(order, k)
			}
			res.state, res.receipt = next, r
			p.c.applied.Add(1)
		case Late:
			late = append(late, store.LateReceipt{Receipt: r, Reason: LateReason, RecordedAt: now})
			p.c.late.Add(1)
			p.m.late.WithLabelValues(r.AccountID).Inc()
		default:
			p.c.ignored.Add(1)
		}
		p.m.merged.WithLabelValues(d.String()).Inc()
		if r.CallbackData != "" && callbacks[k] == "" {
			callbacks[k] = r.CallbackData
		}
	}
	out := mergeOutcome{resolve: make([]resolution, 0, len(order))}
	states := make([]store.MessageState, 0, len(order))
	for _, k := range order {
		res := changed[k]
		res.callback = callbacks[k]
		states = append(states, res.state)
		out.resolve = append(out.resolve, *res)
	}
	{
		errs := make(chan error, 2)
		go func() {
			errs <- p.retry(ctx, "write states", func(ctx context.Context) error { return p.st.PutStates(ctx, states) })
		}()
		go func() {
			errs <- p.retry(ctx, "audit late receipts", func(ctx context.Context) error { return p.st.AddLateReceipts(ctx, late) })
		}()
		for range 2 {
			if e := <-errs; e != nil && err == nil {
				err = e
			}
		}
	}
	if err != nil {
		return mergeOutcome{}, fmt.Errorf("receipts: merge: %w", err)
	}
	return out, nil
}

// ack deletes a processed batch from the log and reports how many entries
// were still there.
func (p *Pipeline) ack(ctx context.Context, batch []store.LoggedReceipt) (int, error) {
	ids := make([]int64, len(batch))
	for i := range batch {
		ids[i] = batch[i].ID
	}
	var n int
	err := p.retry(ctx, "acknowledge receipt log", func(ctx context.Context) error {
		var err error
		n, err = p.st.AckReceiptLog(ctx, ids)
		return err
	})
	return n, err
}
