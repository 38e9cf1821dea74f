package receipts

import (
	"context"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// batchRun is one batch of logged receipts on its way through process.
// Every slice indexed by i runs parallel to batch.
type batchRun struct {
	batch      []store.LoggedReceipt
	keys       []store.ReceiptKey
	callback   []bool // by i: carries callback data; nil when none does
	dupLayer   []string
	decisions  []Decision
	cand       []int // indexes into batch of the receipts no dedup layer caught
	now        time.Time
	lateWindow time.Duration
	remerge    bool
	// stored counts the candidates L3 found stored already.
	stored int
}

// process takes one batch of logged receipts of one partition (part -1:
// recovery at Start) through L2, L3, the merge and message resolution;
// when it returns nil all of that is durable and the caller acknowledges
// the batch in the log (ack). remerge merges receipts the dedup layers call
// stored (see recover). Store failures are retried (bounded); an error
// means the batch is still in the log and may be processed again.
func (p *Pipeline) process(ctx context.Context, part int, batch []store.LoggedReceipt, remerge bool) error {
	_, err := p.processRun(ctx, part, batch, remerge)
	return err
}

// processRun is process, returning the batch's run for what it found.
func (p *Pipeline) processRun(ctx context.Context, part int, batch []store.LoggedReceipt, remerge bool) (*batchRun, error) {
	b := p.newBatchRun(batch, remerge)
	if part >= 0 {
		p.parts[part].lag.Set(max(0, time.Since(oldestReceived(batch)).Seconds()))
	}
	if !remerge {
		if err := p.dedupBloom(ctx, b); err != nil {
			return b, err
		}
	}
	b.cand = b.candidates()
	if len(b.cand) == 0 {
		return b, nil
	}
	fresh, err := p.storeAndMerge(ctx, b)
	if err != nil {
		return b, err
	}
	if err := p.recordDecisions(ctx, b, fresh); err != nil {
		return b, err
	}
	p.observeProcessed(b)
	return b, nil
}

func (p *Pipeline) newBatchRun(batch []store.LoggedReceipt, remerge bool) *batchRun {
	b := &batchRun{
		batch:      batch,
		keys:       make([]store.ReceiptKey, len(batch)),
		dupLayer:   make([]string, len(batch)),
		decisions:  make([]Decision, len(batch)),
		now:        p.now().UTC(),
		lateWindow: p.lateWindow(),
		remerge:    remerge,
	}
	for i := range batch {
		b.keys[i] = keyOf(batch[i].Receipt)
		if batch[i].CallbackData != "" {
			if b.callback == nil {
				b.callback = make([]bool, len(batch))
			}
			b.callback[i] = true
		}
	}
	return b
}

func oldestReceived(batch []store.LoggedReceipt) time.Time {
	oldest := batch[0].ReceivedAt
	for i := range batch {
		if batch[i].ReceivedAt.Before(oldest) {
			oldest = batch[i].ReceivedAt
		}
	}
	return oldest
}

// dedupBloom is L2: the Bloom filter, whose hits are confirmed against the
// store. It marks each duplicate with the layer that found it.
func (p *Pipeline) dedupBloom(ctx context.Context, b *batchRun) error {
	var dup []bool
	var st DedupStats
	err := p.retry(ctx, "dedup receipts", func(ctx context.Context) error {
		var err error
		dup, st, err = p.bloom.Dedup(ctx, b.keys, b.callback, p.st)
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
			b.dupLayer[i] = layer
		}
	}
	// Repeats inside the batch are found before the filter is asked.
	p.countDedup(LayerBatch, st.Repeats)
	p.countDedup(layer, st.Confirmed)
	p.c.fp.Add(int64(st.FalsePositives))
	p.m.falsePositives.Add(float64(st.FalsePositives))
	if st.Repeats > 0 {
		first := make(copies, len(b.keys))
		for i, k := range b.keys {
			if first.repeat(k, b.callback != nil && b.callback[i]) {
				b.dupLayer[i] = LayerBatch
			}
		}
	}
	return nil
}

// candidates lists the receipts no dedup layer caught.
func (b *batchRun) candidates() []int {
	var cand []int
	for i := range b.batch {
		if b.dupLayer[i] == "" {
			cand = append(cand, i)
		}
	}
	return cand
}

// storeAndMerge runs L3 and the merge side by side, so that their writes
// share a commit, and returns L3's answer: which candidates are new. The
// store's unique key decides what is new for good, while the merge already
// folds in every candidate. A candidate L3 then finds stored (the Bloom
// filter forgets across restarts and after 48 h) was merged before, and
// merging it again changes nothing: the state is a maximum that already
// holds it — unless it was late then, and the state has changed since;
// merge repairs that rare case once L3 has answered. Only its audit row
// would repeat, so late receipts are written once L3 has answered, for new
// ones alone.
func (p *Pipeline) storeAndMerge(ctx context.Context, b *batchRun) ([]bool, error) {
	candRs := make([]wamux.Receipt, len(b.cand))
	for j, i := range b.cand {
		candRs[j] = b.batch[i].Receipt
	}
	if both, ok := p.st.(store.ReceiptStateWriter); ok {
		// The store writes receipts and states together for less: the
		// merge stores the candidates with the states they make.
		return p.merge(ctx, b, both, candRs, nil)
	}
	insDone := make(chan struct{})
	var fresh []bool
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
	_, mergeErr := p.merge(ctx, b, nil, nil, inserted)
	if _, err := inserted(); err != nil {
		return nil, err
	}
	if mergeErr != nil {
		return nil, mergeErr
	}
	return fresh, nil
}

// recordDecisions counts what each new candidate did and audits the late
// ones; a candidate L3 found stored is counted as its duplicate instead.
func (p *Pipeline) recordDecisions(ctx context.Context, b *batchRun, fresh []bool) error {
	var late []store.LateReceipt
	l3 := 0
	for j, i := range b.cand {
		if !fresh[j] {
			b.stored++
		}
		if !fresh[j] && !b.remerge {
			b.dupLayer[i] = LayerStore
			l3++
			continue
		}
		switch b.decisions[i] {
		case Apply:
			p.c.applied.Add(1)
		case Late:
			late = append(late, store.LateReceipt{Receipt: b.batch[i].Receipt, Reason: LateReason, RecordedAt: b.now})
			p.c.late.Add(1)
			p.m.late.WithLabelValues(b.batch[i].AccountID).Inc()
		default:
			p.c.ignored.Add(1)
		}
		p.m.merged.WithLabelValues(b.decisions[i].String()).Inc()
	}
	p.countDedup(LayerStore, l3)
	return p.retry(ctx, "audit late receipts", func(ctx context.Context) error { return p.st.AddLateReceipts(ctx, late) })
}

// observeProcessed records the end-to-end latency of the new receipts and
// hands the batch's outcome to the Observer, if any.
func (p *Pipeline) observeProcessed(b *batchRun) {
	done := p.now()
	for _, i := range b.cand {
		if b.dupLayer[i] == "" {
			p.m.latency.Observe(max(0, done.Sub(b.batch[i].ReceivedAt).Seconds()))
		}
	}
	if p.cfg.Observer == nil {
		return
	}
	obs := make([]Processed, len(b.batch))
	for i := range b.batch {
		d := b.decisions[i]
		if b.dupLayer[i] != "" {
			d = Ignore
		}
		obs[i] = Processed{Key: b.keys[i], Duplicate: b.dupLayer[i], Decision: d, Latency: done.Sub(b.batch[i].ReceivedAt)}
	}
	p.cfg.Observer(obs)
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
