package agent

import (
	"cmp"
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/wamux/wamux"
)

// run is the one loop that delivers the spool: it wakes every
// FlushInterval, or early when FlushEvents receipts wait, sends everything
// durable in batches of up to MaxBatch, and retries each batch until the
// gateway acknowledges it. One batch is in flight at a time, so acks arrive
// in spool order and one number (the ack mark) says what is done.
func (a *Agent) run(ctx context.Context) {
	defer close(a.done)
	tick := time.NewTicker(a.cfg.FlushInterval)
	defer tick.Stop()
	var cur cursor
	for {
		draining := false
		select {
		case <-ctx.Done():
			return
		case <-a.kick:
			if a.unflushed.Load() < int64(a.cfg.FlushEvents) {
				continue // stale: the batch that raised it is already sent
			}
		case <-tick.C:
		case <-a.drain:
			draining = true
		}
		empty := a.flush(ctx, &cur, draining)
		if draining {
			a.drained.Store(empty)
			return
		}
	}
}

// flush sends the durable receipts in batches. After the first batch it
// goes on only while a full FlushEvents batch waits (or everything is to
// be drained), so a trickle of reports is gathered for FlushInterval
// instead of chased one small request at a time. It returns true when it
// stopped because nothing durable was left to send.
func (a *Agent) flush(ctx context.Context, cur *cursor, drain bool) bool {
	for first := true; ; first = false {
		if !first && !drain && a.unflushed.Load() < int64(a.cfg.FlushEvents) {
			return false
		}
		recs, next, err := a.spool.read(*cur, a.cfg.MaxBatch)
		if err != nil {
			a.cfg.Logger.Error("agent: read spool", "err", err)
			return false
		}
		if len(recs) == 0 {
			*cur = next
			return true
		}
		if !a.deliver(ctx, recs) {
			return false
		}
		*cur = next
		a.unflushed.Add(-int64(len(recs)))
	}
}

// deliver sends recs until the gateway takes them (or rejects them for
// good, and they are dead-lettered); false means ctx ended first. A
// configuration error (verdictConfig) is retried like a 503, however long
// it lasts, so the spool keeps what is reported until it is fixed.
func (a *Agent) deliver(ctx context.Context, recs []record) bool {
	log := a.cfg.Logger.With("account_id", a.cfg.AccountID, "receipts", len(recs))
	for n := 0; ; n++ {
		at := a.post(ctx, recs)
		a.stats.sent.Add(uint64(len(recs)))
		switch at.verdict {
		case verdictAcked:
			a.stats.accepted.Add(uint64(at.accepted))
			a.stats.duplicates.Add(uint64(at.duplicates))
			a.stats.acked.Add(uint64(len(recs)))
			a.markAcked(log, recs)
			return true
		case verdictReject:
			if i, ok := rejectedReceipt(at, len(recs)); ok && len(recs) > 1 {
				// One bad receipt must not take the good ones with it: the
				// gateway checks a batch in order and names the first
				// receipt it refuses, so the ones before it go on their
				// own, it alone is dead-lettered, and the rest is sent
				// again (and narrowed again if it holds another).
				if i > 0 && !a.deliver(ctx, recs[:i]) {
					return false
				}
				return a.deliver(ctx, recs[i:i+1]) && a.deliver(ctx, recs[i+1:])
			}
			if at.status == http.StatusRequestEntityTooLarge && len(recs) > 1 {
				// The gateway takes any batch the agent builds (MaxBatchLimit),
				// so this is a proxy in front of it with a smaller body limit:
				// the request is too large, not the receipts bad. Halves are
				// sent until each passes; only a receipt too large to pass
				// alone is dead-lettered.
				log.Warn("agent: batch refused as too large, splitting it", "code", at.code, "message", at.message)
				h := len(recs) / 2
				return a.deliver(ctx, recs[:h]) && a.deliver(ctx, recs[h:])
			}
			log.Error("agent: gateway rejected a batch; writing it to the dead-letter file",
				"status", at.status, "code", at.code, "message", at.message, "err", at.err)
			err := writeDeadLetter(a.cfg.SpoolDir, deadLetter{
				Time: a.cfg.Clock.Now().UTC(), Status: at.status, Code: at.code, Message: at.message,
				AccountID: a.cfg.AccountID, Receipts: recs,
			})
			if err == nil {
				a.stats.deadLettered.Add(uint64(len(recs)))
				// Not delivered: a later report of the same receipt is no
				// repeat.
				for _, r := range recs {
					a.repeats.forget(repeatKey{messageID: r.MessageID, typ: wamux.ReceiptType(r.Type)})
				}
				a.markAcked(log, recs)
				return true
			}
			// Not dropped until it is safe somewhere: keep it spooled and
			// try the whole thing again after a backoff.
			log.Error("agent: keeping the rejected batch spooled", "err", err)
		}
		if at.verdict == verdictConfig {
			a.stats.configErrors.Add(1)
		}
		if ctx.Err() != nil {
			return false
		}
		a.stats.retries.Add(1)
		d := backoffDelay(a.cfg.BackoffBase, a.cfg.BackoffCap, n, rand.Float64())
		if at.retryAfter > d {
			d = min(at.retryAfter, a.cfg.BackoffCap)
		}
		switch at.verdict {
		case verdictRetry:
			log.Warn("agent: batch not acknowledged, retrying", "attempt", n+1, "status", at.status,
				"code", at.code, "delay", d, "err", at.err)
		case verdictConfig:
			// An Error each time: nothing is delivered until someone acts.
			log.Error("agent: gateway refused the batch for a configuration error; keeping it spooled and retrying",
				"fix", at.hint, "attempt", n+1, "status", at.status, "code", at.code, "message", at.message, "delay", d)
		}
		select {
		case <-ctx.Done():
			return false
		case <-a.cfg.Clock.After(d):
		}
	}
}

// markAcked moves the durable ack mark past recs. If that fails the batch
// is sent again after a restart, which the gateway's dedup absorbs.
func (a *Agent) markAcked(log *slog.Logger, recs []record) {
	if err := a.spool.ack(recs[len(recs)-1].Seq); err != nil {
		log.Error("agent: record ack in spool", "err", err)
	}
}

// rejectedReceipt reads which receipt of an n-receipt batch a 400 refused,
// from the gateway's message ("receipts[3]: …"; gateways before
// 2026-12-02 said "… receipt 3: …" when the pipeline refused it). A 400 that names none (a
// bad body) concerns the whole batch; an unknown account is a configuration
// error (configHint) and never gets here.
func rejectedReceipt(at attempt, n int) (int, bool) {
	if at.status != http.StatusBadRequest {
		return 0, false
	}
	m := rejectedIndexRE.FindStringSubmatch(at.message)
	if m == nil {
		return 0, false
	}
	i, err := strconv.Atoi(cmp.Or(m[1], m[2]))
	if err != nil || i < 0 || i >= n {
		return 0, false
	}
	return i, true
}

var rejectedIndexRE = regexp.MustCompile(`^receipts\[(\d+)\]: |\breceipt (\d+): `)
