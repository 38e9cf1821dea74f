package receipts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/stream"
)

// Stream mode (Config.Stream set): the receipt log is the stream. Ingest
// appends each receipt as a record keyed by its account and returns once
// the stream has it durably; this node processes the partitions the
// stream's consumer group assigns it, one batch at a time, and commits a
// batch's offset once the store committed its effects. Revocation waits
// for the batch in flight (stream.Handler), so nothing is held in memory
// across a rebalance: the next holder resumes after the last commit.
//
// Records are processed again after a crash or a rebalance; their first
// processing may have stored them (L3) without merging them, so after an
// assignment a partition merges its batches whatever L3 says (remerge)
// until a batch holds no receipt L3 had stored: the batch the previous
// holder had in flight was stored whole or not at all, so past it there
// is nothing left to repair.

// streamRetryAfter is the wait asked of a sender whose receipts the
// stream refused (Retry-After).
const streamRetryAfter = 5 * time.Second

// streamHandler is the pipeline's stream.Handler.
type streamHandler struct {
	p *Pipeline

	mu sync.Mutex
	// remerge marks the partitions whose next batch merges whatever the
	// dedup layers say.
	remerge map[int32]bool
}

// encodeRecord is the stream form of a receipt.
func encodeRecord(r wamux.Receipt) (stream.Record, error) {
	v, err := json.Marshal(r)
	if err != nil {
		return stream.Record{}, err
	}
	return stream.Record{Key: r.AccountID, Value: v}, nil
}

// appendStreamed is Ingest's durable step in stream mode.
func (p *Pipeline) appendStreamed(ctx context.Context, rs []wamux.Receipt) error {
	recs := make([]stream.Record, len(rs))
	for i, r := range rs {
		rec, err := encodeRecord(r)
		if err != nil {
			return fmt.Errorf("encode receipt: %w", err)
		}
		recs[i] = rec
	}
	if err := p.cfg.Stream.Append(ctx, recs); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.log.Error("receipts: the stream refused an append", "receipts", len(rs), "err", err)
		return &wamux.Error{Code: wamux.EUnavailable, Message: "the receipt stream is unavailable", RetryAfter: streamRetryAfter}
	}
	p.c.appended.Add(int64(len(rs)))
	for _, r := range rs {
		p.lru.Add(r.AccountID, ReceiptID{MessageID: r.MessageID, Type: r.Type}, r.CallbackData != "")
		p.parts[p.partitionOf(r.AccountID)].appended.Add(1)
	}
	return nil
}

// runConsumer keeps this node in the stream's consumer group until Stop,
// joining again (with backoff) when a Consume ends in an error.
func (p *Pipeline) runConsumer() {
	defer p.wg.Done()
	ctx, cancel := context.WithCancel(p.ctx)
	defer cancel()
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	h := &streamHandler{p: p, remerge: map[int32]bool{}}
	delay := p.cfg.Retry.Base
	for {
		err := p.cfg.Stream.Consume(ctx, h)
		if ctx.Err() != nil {
			return
		}
		p.m.failures.WithLabelValues("stream").Inc()
		p.log.Error("receipts: the stream consumer stopped; joining again", "err", err)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		delay = min(2*delay, p.cfg.Retry.Max)
	}
}

// Assigned implements stream.Handler.
func (h *streamHandler) Assigned(_ context.Context, ps []int32) {
	h.mu.Lock()
	for _, p := range ps {
		h.remerge[p] = true
	}
	h.mu.Unlock()
	h.p.log.Info("receipts: stream partitions assigned", "partitions", ps)
}

// Revoked implements stream.Handler: each batch is committed before it
// returns, so nothing is left to finish.
func (h *streamHandler) Revoked(_ context.Context, ps []int32) {
	h.mu.Lock()
	for _, p := range ps {
		delete(h.remerge, p)
	}
	h.mu.Unlock()
	h.p.log.Info("receipts: stream partitions revoked", "partitions", ps)
}

// Batch implements stream.Handler: it processes the records in batches of
// at most BatchMax and then commits their offset. Work in flight runs
// under the pipeline's context, so Stop lets it finish until its own
// deadline. An error leaves the records to be delivered again.
func (h *streamHandler) Batch(ctx context.Context, part int32, recs []stream.Record) error {
	p := h.p
	pt := p.parts[part]
	for p.paused.Load() {
		select {
		case <-pt.wake: // applySettings pokes every partition on resume
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	batch, err := p.decodeRecords(p.ctx, recs)
	if err != nil {
		return err
	}
	for start := 0; start < len(batch); start += p.cfg.BatchMax {
		chunk := batch[start:min(start+p.cfg.BatchMax, len(batch))]
		if err := h.process(part, chunk); err != nil {
			return err
		}
		p.markProcessed(pt, len(chunk))
	}
	err = p.cfg.Stream.Commit(p.ctx, part, recs[len(recs)-1].Offset)
	if errors.Is(err, stream.ErrNotAssigned) {
		// Lost meanwhile: the next holder processes these records again.
		p.log.Warn("receipts: stream partition lost before its commit", "partition", part)
		return nil
	}
	return err
}

// process takes one chunk through the pipeline, merging whatever the
// dedup layers say while the partition is repairing (see above), and
// dead-letters the receipts the store refuses for good.
func (h *streamHandler) process(part int32, chunk []store.LoggedReceipt) error {
	p := h.p
	h.mu.Lock()
	remerge := h.remerge[part]
	h.mu.Unlock()
	b, err := p.processRun(p.ctx, int(part), chunk, remerge)
	if err == nil {
		if remerge && b.stored == 0 {
			h.mu.Lock()
			delete(h.remerge, part)
			h.mu.Unlock()
		}
		return nil
	}
	if transient(err) || p.ctx.Err() != nil {
		p.m.failures.WithLabelValues("store_unavailable").Inc()
		h.mu.Lock()
		h.remerge[part] = true
		h.mu.Unlock()
		return fmt.Errorf("receipts: process stream partition %d: %w", part, err)
	}
	for i := range chunk {
		one := chunk[i : i+1]
		err := p.process(p.ctx, int(part), one, remerge)
		if err == nil {
			continue
		}
		if transient(err) {
			return fmt.Errorf("receipts: process stream partition %d: %w", part, err)
		}
		if err := p.deadLetterUnprocessable(p.ctx, one[0], err); err != nil {
			return fmt.Errorf("receipts: dead-letter a receipt: %w", err)
		}
	}
	return nil
}

// decodeRecords turns stream records into logged receipts (ID: the
// offset); a record that does not decode is dead-lettered.
func (p *Pipeline) decodeRecords(ctx context.Context, recs []stream.Record) ([]store.LoggedReceipt, error) {
	batch := make([]store.LoggedReceipt, 0, len(recs))
	var bad []store.DeadLetter
	for _, rec := range recs {
		var r wamux.Receipt
		if err := json.Unmarshal(rec.Value, &r); err != nil {
			bad = append(bad, store.DeadLetter{Source: "stream", AccountID: rec.Key, Reason: "undecodable stream record", Payload: rec.Value})
			continue
		}
		batch = append(batch, store.LoggedReceipt{ID: rec.Offset, Receipt: r})
	}
	if len(bad) > 0 {
		if err := p.deadLetter(ctx, "undecodable", bad); err != nil {
			return nil, fmt.Errorf("receipts: dead-letter undecodable stream records: %w", err)
		}
	}
	return batch, nil
}
