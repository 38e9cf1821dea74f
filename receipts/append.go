package receipts

import (
	"context"
	"errors"
	"time"

	"github.com/wamux/wamux"
)

// maxAppendRows caps the receipts one log append carries.
const maxAppendRows = 4096

// Holding a group commit open (collect). While the process's CPUs are
// busy, every log append costs CPU that the requests waiting for it need:
// a writer transaction, an fsync and the wake-ups of everyone it answers.
// There the
// appender keeps a group open while calls keep arriving, up to
// appendGroupRows receipts, appendGap after the last arrival and
// Config.AppendHold in all, so fewer, larger appends do the same work.
// When the CPUs are not busy it appends at once: waiting would only add
// latency.
const (
	appendGroupRows  = 128
	appendGapDefault = 500 * time.Microsecond
	// appendBusyShare is the share of GOMAXPROCS CPUs in use (cpuLoad)
	// from which the appender holds groups open.
	appendBusyShare = 0.7
)

// appendReq is one Ingest call's receipts waiting to be appended.
type appendReq struct {
	rs   []wamux.Receipt
	done chan error // buffered: the appender never waits for the caller
}

// append makes rs durable in the log together with whatever other Ingest
// calls are waiting at the same moment, and returns once they are: the
// pipeline's own group commit. While one append is in flight the next
// calls queue up and go together in the following one, so a burst of
// webhooks costs a few multi-row inserts instead of one statement (and
// savepoint) each, and a lone call waits for nothing but its own commit.
func (p *Pipeline) append(ctx context.Context, rs []wamux.Receipt) error {
	req := &appendReq{rs: rs, done: make(chan error, 1)}
	select {
	case p.appends <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-p.stop:
		return wamux.Errorf(wamux.EUnavailable, "the receipt pipeline is stopping")
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		// The append may still commit; the appender then queues the
		// receipts as usual and a retry by the sender is a duplicate.
		return ctx.Err()
	case <-p.ctx.Done():
		// Stopped after this call slipped in behind the final drain.
		return wamux.Errorf(wamux.EUnavailable, "the receipt pipeline stopped")
	}
}

// runAppender is the one goroutine that appends to the log. After a
// commit it records the keys in L1 and hands the receipts to their
// partitions itself, so a caller that gave up waiting loses nothing.
func (p *Pipeline) runAppender() {
	defer p.wg.Done()
	for {
		var first *appendReq
		select {
		case first = <-p.appends:
		case <-p.stop:
			p.drainAppends()
			return
		}
		p.appendBatch(p.collect(first))
	}
}

// collect takes first and whatever else is already waiting, and while the
// CPUs are busy holds the group open for more (see appendGroupRows).
func (p *Pipeline) collect(first *appendReq) []*appendReq {
	batch := []*appendReq{first}
	n := len(first.rs)
	var (
		timer    *time.Timer
		deadline time.Time
	)
	for n < maxAppendRows {
		select {
		case r := <-p.appends:
			batch = append(batch, r)
			n += len(r.rs)
			continue
		default:
		}
		if n >= appendGroupRows || p.cfg.AppendHold <= 0 {
			return batch
		}
		if timer == nil {
			if p.busy() < appendBusyShare {
				return batch
			}
			deadline = time.Now().Add(p.cfg.AppendHold)
			timer = time.NewTimer(min(p.appendGap, p.cfg.AppendHold))
			defer timer.Stop()
		} else {
			left := time.Until(deadline)
			if left <= 0 {
				return batch
			}
			timer.Reset(min(p.appendGap, left))
		}
		select {
		case r := <-p.appends:
			batch = append(batch, r)
			n += len(r.rs)
		case <-timer.C:
			return batch
		case <-p.stop:
			return batch
		}
	}
	return batch
}

// drainAppends answers the calls that were queued when Stop came.
func (p *Pipeline) drainAppends() {
	for {
		select {
		case r := <-p.appends:
			p.appendBatch([]*appendReq{r})
		default:
			return
		}
	}
}

// appendBatch appends the receipts of several calls in one store call. If
// the store refuses the combined batch for good (not a transient failure),
// each call is tried alone, so one caller's bad input fails only itself.
func (p *Pipeline) appendBatch(batch []*appendReq) {
	all := batch[0].rs
	if len(batch) > 1 {
		n := 0
		for _, r := range batch {
			n += len(r.rs)
		}
		all = make([]wamux.Receipt, 0, n)
		for _, r := range batch {
			all = append(all, r.rs...)
		}
	}
	ctx := context.WithoutCancel(p.ctx)
	var ids []int64
	err := p.retry(ctx, "append to the receipt log", func(ctx context.Context) error {
		var err error
		ids, err = p.st.AppendReceiptLog(ctx, all)
		return err
	})
	if err != nil && len(batch) > 1 && !transient(err) {
		for _, r := range batch {
			p.appendBatch([]*appendReq{r})
		}
		return
	}
	if err == nil && len(ids) != len(all) {
		err = errors.New("receipts: the store returned the wrong number of log ids")
	}
	if err != nil {
		for _, r := range batch {
			r.done <- err
		}
		return
	}
	// Durable from here on: remember the keys (L1), hand the receipts to
	// their partitions, then answer.
	p.c.appended.Add(int64(len(all)))
	for _, r := range all {
		p.lru.Add(r.AccountID, ReceiptID{MessageID: r.MessageID, Type: r.Type}, r.CallbackData != "")
	}
	p.dispatch(ctx, ids, all)
	for _, r := range batch {
		r.done <- nil
	}
}
