package postgres

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux/store"
)

// Message updates are group-committed: the send path and the receipt
// pipeline each make a few single-row updates per message, and one
// transaction each would cost a round trip and a WAL flush apiece. Callers
// queue their update; updateFlushers goroutines each take every update
// queued so far and send them as one pipelined batch, which the server runs
// as one implicit transaction: one round trip, one commit. Under light load
// each update finds an idle flusher and goes alone, without waiting.
const (
	// updateFlushers is how many batches may be in flight at once.
	updateFlushers = 4
	// updateBatchMax bounds the updates of one batch.
	updateBatchMax = 256
	// updateQueue is how many updates may wait for a flusher.
	updateQueue = 4096
)

// updateReq is one caller's update; done receives its answer.
type updateReq struct {
	ctx  context.Context
	u    store.MessageUpdate
	now  int64
	done chan updateRes
}

// updateRes is the answer to an updateReq: rows the update changed, or
// why it did not run.
type updateRes struct {
	rows int64
	err  error
}

// updateWriter owns the flushers.
type updateWriter struct {
	pool interface {
		SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	}
	reqs chan *updateReq
	quit chan struct{}
	// exited is closed once every flusher has returned.
	exited chan struct{}
	wg     sync.WaitGroup
}

func (s *Store) startUpdates() {
	w := &updateWriter{pool: s.pool, reqs: make(chan *updateReq, updateQueue),
		quit: make(chan struct{}), exited: make(chan struct{})}
	for i := 0; i < updateFlushers; i++ {
		w.wg.Add(1)
		go w.flusher()
	}
	go func() { w.wg.Wait(); close(w.exited) }()
	s.updates = w
}

// stop lets the flushers finish the batches they run, answers what is
// still queued with errClosed and waits for them to return.
func (w *updateWriter) stop() {
	close(w.quit)
	<-w.exited
	for {
		select {
		case r := <-w.reqs:
			r.done <- updateRes{err: errClosed}
		default:
			return
		}
	}
}

// do queues one update and waits for its answer. Once queued, the answer
// is waited for even if ctx ends: a flusher skips a request whose context
// ended before the request's batch was sent, and answers one it ran right
// after the commit, so the answer is exact.
func (w *updateWriter) do(ctx context.Context, u store.MessageUpdate, now int64) (int64, error) {
	r := &updateReq{ctx: ctx, u: u, now: now, done: make(chan updateRes, 1)}
	select {
	case w.reqs <- r:
	case <-w.quit:
		return 0, errClosed
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case res := <-r.done:
		return res.rows, res.err
	case <-w.exited:
		// Queued after the last flusher's last look at the queue: stop
		// answers it, or it never ran.
		select {
		case res := <-r.done:
			return res.rows, res.err
		default:
			return 0, errClosed
		}
	}
}

func (w *updateWriter) flusher() {
	defer w.wg.Done()
	batch := make([]*updateReq, 0, updateBatchMax)
	for {
		select {
		case <-w.quit:
			return
		case r := <-w.reqs:
			batch = append(batch[:0], r)
		}
	more:
		for len(batch) < updateBatchMax {
			select {
			case r := <-w.reqs:
				batch = append(batch, r)
			default:
				break more
			}
		}
		w.flush(batch)
		clear(batch)
	}
}

// flush runs batch in one implicit transaction. When any update fails the
// transaction is rolled back and each update runs again on its own, so
// that one update's error (a wamid another message holds, a deadlock)
// is that update's answer alone.
func (w *updateWriter) flush(batch []*updateReq) {
	live := batch[:0]
	var deadline time.Time
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- updateRes{err: err}
			continue
		}
		live = append(live, r)
		if d, ok := r.ctx.Deadline(); ok && d.After(deadline) {
			deadline = d
		}
	}
	if len(live) == 0 {
		return
	}
	// The batch outlives any one caller's cancellation (the others wait
	// for it), but not the last of their deadlines.
	ctx := context.Background()
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	if len(live) > 1 {
		// One order of row locks for every batch: two batches touching
		// the same messages cannot deadlock each other. Updates of one
		// message keep their order.
		slices.SortStableFunc(live, func(a, b *updateReq) int { return cmp.Compare(a.u.MsgID, b.u.MsgID) })
	}
	rows, err := w.send(ctx, live)
	if err == nil {
		for i, r := range live {
			r.done <- updateRes{rows: rows[i]}
		}
		return
	}
	if len(live) == 1 {
		live[0].done <- updateRes{err: err}
		return
	}
	for _, r := range live {
		rows, err := w.send(ctx, []*updateReq{r})
		r.done <- updateRes{rows: rows[0], err: err}
	}
}

// send runs the updates as one pipelined batch and returns the rows each
// changed.
func (w *updateWriter) send(ctx context.Context, reqs []*updateReq) ([]int64, error) {
	b := &pgx.Batch{}
	for _, r := range reqs {
		sql, args := updateStatement(r.u, r.now)
		b.Queue(sql, args...)
	}
	br := w.pool.SendBatch(ctx, b)
	rows := make([]int64, len(reqs))
	var err error
	for i := range reqs {
		tag, e := br.Exec()
		if e != nil {
			err = e
			break
		}
		rows[i] = tag.RowsAffected()
	}
	if e := br.Close(); err == nil {
		err = e
	}
	return rows, err
}
