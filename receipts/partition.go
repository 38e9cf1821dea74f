package receipts

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// partition is the in-memory side of one stream partition: the receipts
// waiting for its processor, and how far back the log holds receipts that
// were not queued (spilled).
type partition struct {
	id     int
	queued prometheus.Gauge
	lag    prometheus.Gauge

	mu        sync.Mutex
	queue     []store.LoggedReceipt
	firstAt   time.Time // when the oldest queued receipt was queued
	spillFrom int64     // lowest spilled log id, noSpill when none
	wake      chan struct{}
	// acked is closed when the last batch's acknowledgement is done; the
	// processor's goroutine alone reads and replaces it.
	acked chan struct{}
	// space is signalled (on mu) when the processor takes from the queue.
	space *sync.Cond
	// remerge holds the log ids of batches that failed part way: L3 may
	// have stored them before the merge failed, so when read back they
	// are merged whatever the dedup layers say (see Pipeline.recover).
	remerge map[int64]struct{}
	// appended and processed count this run's receipts of the partition's
	// accounts made durable and acknowledged (see Pipeline.Appended).
	appended, processed atomic.Int64
}

func newPartition(id int, m *metrics) *partition {
	pt := &partition{
		id:        id,
		queued:    m.queued.WithLabelValues(partitionLabel(id)),
		lag:       m.lag.WithLabelValues(partitionLabel(id)),
		spillFrom: noSpill,
		wake:      make(chan struct{}, 1),
	}
	pt.space = sync.NewCond(&pt.mu)
	pt.remerge = map[int64]struct{}{}
	return pt
}

// offer queues durable receipts. A full queue makes the caller wait for
// room, up to spillAfter (backpressure: a webhook is answered later, not
// refused); after that, or when merging is paused, the receipts are only
// recorded as spilled. Spilling loses nothing: the receipts are in the log
// and the processor reads them back from spillFrom.
func (pt *partition) offer(ctx context.Context, ls []store.LoggedReceipt, capacity int, paused bool, spillAfter time.Duration) (spilled bool) {
	pt.mu.Lock()
	if !paused && len(pt.queue)+len(ls) > capacity && len(pt.queue) > 0 {
		wake := func() {
			pt.mu.Lock()
			pt.space.Broadcast()
			pt.mu.Unlock()
		}
		t := time.AfterFunc(spillAfter, wake)
		stop := context.AfterFunc(ctx, wake)
		deadline := time.Now().Add(spillAfter)
		for len(pt.queue)+len(ls) > capacity && len(pt.queue) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
			pt.space.Wait()
		}
		t.Stop()
		stop()
	}
	if paused || (len(pt.queue)+len(ls) > capacity && len(pt.queue) > 0) {
		for _, l := range ls {
			pt.spillFrom = min(pt.spillFrom, l.ID)
		}
		spilled = true
	} else {
		if len(pt.queue) == 0 {
			pt.firstAt = time.Now()
		}
		pt.queue = append(pt.queue, ls...)
		pt.queued.Set(float64(len(pt.queue)))
	}
	pt.mu.Unlock()
	pt.poke()
	return spilled
}

// spill records that the log holds unprocessed receipts from id on (a
// batch that failed for good stays in the log and is read back later).
func (pt *partition) spill(id int64) {
	pt.mu.Lock()
	pt.spillFrom = min(pt.spillFrom, id)
	pt.mu.Unlock()
}

func (pt *partition) poke() {
	select {
	case pt.wake <- struct{}{}:
	default:
	}
}

// take returns up to max queued receipts once at least batchMin wait or
// the oldest has waited batchWait (or drain asks for whatever is there),
// and otherwise how long to wait before asking again.
func (pt *partition) take(batchMin, max int, batchWait time.Duration, drain bool) ([]store.LoggedReceipt, time.Duration, int64) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	n := len(pt.queue)
	if n == 0 {
		spill := pt.spillFrom
		pt.spillFrom = noSpill
		return nil, 0, spill
	}
	if wait := batchWait - time.Since(pt.firstAt); n < batchMin && wait > 0 && !drain {
		return nil, wait, noSpill
	}
	k := min(n, max)
	out := make([]store.LoggedReceipt, k)
	copy(out, pt.queue)
	rest := copy(pt.queue, pt.queue[k:])
	clear(pt.queue[rest:])
	pt.queue = pt.queue[:rest]
	pt.space.Broadcast()
	if rest > 0 {
		pt.firstAt = time.Now()
	}
	pt.queued.Set(float64(rest))
	return out, 0, noSpill
}

// run is one partition's processor: it owns the partition's accounts, so
// their receipts are deduplicated and merged by one goroutine at a time.
func (p *Pipeline) run(pt *partition) {
	defer p.wg.Done()
	for {
		stopping := p.closing.Load()
		if p.paused.Load() && !stopping {
			if !p.sleep(pt, 0) {
				return
			}
			continue
		}
		batch, wait, spill := pt.take(p.batchMin(), p.cfg.BatchMax, p.cfg.BatchWait, stopping)
		switch {
		case len(batch) > 0:
			if !p.processOrSpill(pt, batch, false) && !p.sleep(pt, p.cfg.Retry.Max) {
				return
			}
		case wait > 0:
			if !p.sleep(pt, wait) {
				return
			}
		case spill != noSpill && !stopping:
			p.reload(pt, spill)
		case stopping:
			return
		default:
			// Nothing queued or left in the log: nothing lags. Without
			// this the gauge would keep the age of the last batch, and an
			// idle partition that last drained a backlog would hold the
			// lag alert on.
			pt.lag.Set(0)
			if !p.sleep(pt, 0) {
				return
			}
		}
	}
}

// batchBusyShare is the share of GOMAXPROCS CPUs in use (cpuLoad) from
// which a partition waits for BatchMinBusy receipts. It is higher than
// appendBusyShare on purpose: waiting costs nothing only when the CPUs
// are saturated, so that what the partition leaves idle others use.
// Below that the writer is the queue, and a partition that waits for more
// leaves it idle; the webhook flood the wait is for runs at 0.9 and above.
const batchBusyShare = 0.9

// batchMin is how many queued receipts make a batch now: BatchMinBusy
// while the CPUs are saturated, so that a flood is processed in fewer,
// larger batches, and BatchMin otherwise, so that a trickle is not held
// back and the writer is not left idle.
func (p *Pipeline) batchMin() int {
	if p.cfg.BatchMinBusy > p.cfg.BatchMin && p.busy() >= batchBusyShare {
		return p.cfg.BatchMinBusy
	}
	return p.cfg.BatchMin
}

// sleep waits for a poke, d (when positive), or the end; false means the
// pipeline is gone.
func (p *Pipeline) sleep(pt *partition, d time.Duration) bool {
	var timer <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-pt.wake:
	case <-timer:
	case <-p.stop:
		// Draining: keep going until the queue is empty.
	case <-p.ctx.Done():
		return false
	}
	return p.ctx.Err() == nil
}

// processOrSpill processes a batch; if the store keeps failing beyond the
// bounded retry, the batch stays in the log, the partition is marked to
// read it back, and false tells the caller to back off.
func (p *Pipeline) processOrSpill(pt *partition, batch []store.LoggedReceipt, remerge bool) bool {
	err := p.process(p.ctx, pt.id, batch, remerge)
	if err == nil {
		if remerge {
			pt.forgetRemerge(batch)
		}
		p.ackAsync(pt, batch)
		return true
	}
	if !transient(err) && p.ctx.Err() == nil {
		return p.isolatePoison(pt, batch, remerge)
	}
	pt.spillForRemerge(batch)
	if p.ctx.Err() == nil {
		p.m.failures.WithLabelValues("store_unavailable").Inc()
		p.log.Error("receipts: batch left in the log after retries; it will be read back", "partition", pt.id,
			"receipts", len(batch), "err", err)
	}
	return false
}

// reload reads the log from id `from` on and processes this partition's
// entries: receipts that did not fit the queue, arrived while merging was
// paused, or belong to a batch that failed. Every partition reads the whole
// log and keeps its own share; this only happens in degraded operation.
// An entry also still queued is processed twice; the second time the
// dedup layers find it stored and it changes nothing.
func (p *Pipeline) reload(pt *partition, from int64) {
	after := from - 1
	for p.ctx.Err() == nil && !p.paused.Load() {
		var page []store.LoggedReceipt
		err := p.retry(p.ctx, "read receipt log", func(ctx context.Context) error {
			var err error
			page, err = p.st.ListReceiptLog(ctx, after, p.cfg.ReloadPage)
			return err
		})
		if err != nil {
			pt.spill(after + 1)
			p.sleep(pt, p.cfg.Retry.Max)
			return
		}
		if len(page) == 0 {
			return
		}
		mine := page[:0]
		for _, l := range page {
			if p.partitionOf(l.AccountID) == pt.id {
				mine = append(mine, l)
			}
		}
		p.c.readBack.Add(int64(len(mine)))
		again, first := pt.splitRemerge(mine, p.backlogUpTo.Load())
		for _, g := range []struct {
			ls      []store.LoggedReceipt
			remerge bool
		}{{first, false}, {again, true}} {
			for start := 0; start < len(g.ls); start += p.cfg.BatchMax {
				if !p.processOrSpill(pt, g.ls[start:min(start+p.cfg.BatchMax, len(g.ls))], g.remerge) {
					// The groups are not in id order: the other one may
					// hold lower ids not processed yet. Read the page back
					// from its start (what was acknowledged is skipped).
					pt.spill(mine[0].ID)
					return
				}
			}
		}
		after = page[len(page)-1].ID
	}
	if p.paused.Load() {
		pt.spill(after + 1)
	}
}

// isolatePoison processes a batch the store refused as invalid one receipt
// at a time, and dead-letters (then acknowledges) each receipt it still
// refuses, so one bad receipt cannot block its partition.
func (p *Pipeline) isolatePoison(pt *partition, batch []store.LoggedReceipt, remerge bool) bool {
	for i := range batch {
		one := batch[i : i+1]
		err := p.process(p.ctx, pt.id, one, remerge)
		if err == nil {
			n, err := p.ack(p.ctx, one)
			if err != nil {
				pt.spill(one[0].ID)
				return false
			}
			p.markProcessed(pt, n)
			continue
		}
		if transient(err) {
			pt.spillForRemerge(batch[i:])
			return false
		}
		if err := p.deadLetterUnprocessable(p.ctx, one[0], err); err != nil {
			pt.spill(one[0].ID)
			return false
		}
		n, err := p.ack(p.ctx, one)
		if err != nil {
			pt.spill(one[0].ID)
			return false
		}
		p.markProcessed(pt, n)
	}
	return true
}

// deadLetterUnprocessable keeps a receipt the store refused for good,
// with why, in the dead letters.
func (p *Pipeline) deadLetterUnprocessable(ctx context.Context, r store.LoggedReceipt, why error) error {
	payload, _ := json.Marshal(r.Receipt)
	dl := store.DeadLetter{Source: r.Source, AccountID: r.AccountID, Reason: "unprocessable receipt: " + wamux.ErrorMessage(why), Payload: payload}
	return p.deadLetter(ctx, "unprocessable", []store.DeadLetter{dl})
}

// ackAsync acknowledges a batch whose effects are durable while the
// processor goes on with the next one, so the delete shares a commit with
// the next batch's writes instead of costing a commit of its own. At most
// one acknowledgement per partition is in flight. If it fails, the batch
// stays in the log: read back, it is found stored and changes nothing.
func (p *Pipeline) ackAsync(pt *partition, batch []store.LoggedReceipt) {
	if pt.acked != nil {
		<-pt.acked
	}
	done := make(chan struct{})
	pt.acked = done
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(done)
		n, err := p.ack(p.ctx, batch)
		if err != nil {
			lowest := batch[0].ID
			for _, l := range batch {
				lowest = min(lowest, l.ID)
			}
			pt.spill(lowest)
			pt.poke()
			return
		}
		p.markProcessed(pt, n)
	}()
}

// spillForRemerge leaves a failed batch to the log, to be read back and
// merged again.
func (pt *partition) spillForRemerge(batch []store.LoggedReceipt) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	for _, l := range batch {
		pt.remerge[l.ID] = struct{}{}
		pt.spillFrom = min(pt.spillFrom, l.ID)
	}
}

func (pt *partition) forgetRemerge(batch []store.LoggedReceipt) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	for _, l := range batch {
		delete(pt.remerge, l.ID)
	}
}

// splitRemerge separates read-back entries of failed batches, and those an
// earlier run left (ids up to backlogUpTo), from the others.
func (pt *partition) splitRemerge(ls []store.LoggedReceipt, backlogUpTo int64) (again, first []store.LoggedReceipt) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if len(pt.remerge) == 0 && backlogUpTo <= 0 {
		return nil, ls
	}
	for _, l := range ls {
		if _, ok := pt.remerge[l.ID]; ok || l.ID <= backlogUpTo {
			again = append(again, l)
		} else {
			first = append(first, l)
		}
	}
	return again, first
}
