package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// request is one caller's write: fn runs inside the shared transaction and
// done receives its outcome once the transaction has committed.
type request struct {
	ctx  context.Context
	fn   func(w *writeTx) error
	done chan error
	// oneStatement: fn writes with a single SQL statement, which SQLite
	// makes atomic by itself (a failing statement undoes its own changes),
	// so the savepoint around it is not needed. Hot single-row updates
	// save two statements per request this way.
	oneStatement bool
	// deferSync: the caller needs its answer only once durable, not the
	// writer to wait for the fsync (walsync.go).
	deferSync bool
	// ordered: the caller needs its writes committed when answered, and
	// durable no later than anything committed after them, but not
	// durable yet: it is answered right after COMMIT (walsync.go).
	ordered bool
}

// write hands fn to the writer and waits until the transaction that ran it
// has committed. A nil error means fn's writes are durable.
//
// Once queued, the caller waits for the writer's answer even if ctx ends:
// the writer skips requests whose context has ended before it reaches
// them, and a request it has run is answered right after its commit, so
// the wait is short and the answer is exact: no "maybe committed", and fn
// never writes to the caller's variables after write has returned.
func (s *Store) write(ctx context.Context, fn func(w *writeTx) error) error {
	return s.enqueue(ctx, &request{ctx: ctx, fn: fn, done: make(chan error, 1)})
}

// writeDeferred is write for the receipt pipeline's own writes, whose
// batches may commit without waiting for the WAL's fsync: the caller is
// answered after it all the same (walsync.go).
func (s *Store) writeDeferred(ctx context.Context, fn func(w *writeTx) error) error {
	return s.enqueue(ctx, &request{ctx: ctx, fn: fn, done: make(chan error, 1), deferSync: true})
}

// writeOrdered is write for the receipt pipeline's merges and log acks,
// which may be answered once committed, before the WAL's fsync
// (walsync.go).
func (s *Store) writeOrdered(ctx context.Context, fn func(w *writeTx) error) error {
	return s.enqueue(ctx, &request{ctx: ctx, fn: fn, done: make(chan error, 1), ordered: true})
}

// writeOneStatement is write for an fn that changes the database with one
// SQL statement (it may read before or after).
func (s *Store) writeOneStatement(ctx context.Context, fn func(w *writeTx) error) error {
	return s.enqueue(ctx, &request{ctx: ctx, fn: fn, done: make(chan error, 1), oneStatement: true})
}

func (s *Store) enqueue(ctx context.Context, r *request) error {
	if err := ctx.Err(); err != nil {
		return wrapErr(err)
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return errClosed
	}
	select {
	case s.reqs <- r:
	case <-ctx.Done():
		s.mu.RUnlock()
		return wrapErr(ctx.Err())
	}
	s.mu.RUnlock()
	return <-r.done
}

// runWriter is the only goroutine that writes. It takes whatever is queued
// (up to MaxBatch) and commits it as one transaction, so a burst of callers
// pays for one fsync. While it is busy with many callers it holds a small
// batch open for up to GroupWait (see Options). It returns when reqs is
// closed and drained.
func (s *Store) runWriter(w *writeTx) {
	defer close(s.done)
	defer w.closeStmts()
	syncs, synced := make(chan syncBatch, 64), make(chan struct{})
	go s.runSyncer(syncs, synced)
	defer func() {
		close(syncs)
		<-synced
		_ = s.wal.close()
	}()
	batch := make([]*request, 0, s.opts.MaxBatch)
	errs := make([]error, 0, s.opts.MaxBatch)
	g := grouping{wait: s.opts.GroupWait}
	for {
		first, ok := <-s.reqs
		if !ok {
			return
		}
		batch = append(batch[:0], first)
		var until time.Time
		lingered := false
		if now := time.Now(); g.linger(now) {
			until, lingered = now.Add(g.wait), true
		}
	fill:
		for len(batch) < s.opts.MaxBatch {
			select {
			case r, ok := <-s.reqs:
				if !ok {
					break fill
				}
				batch = append(batch, r)
				continue
			default:
			}
			if !lingered || len(batch) >= groupFill || !time.Now().Before(until) {
				break
			}
			// Yield rather than sleep: a timer this short fires a
			// millisecond late, and the goroutines that will send the
			// next requests need this core meanwhile.
			runtime.Gosched()
		}
		w.syncFor(batch)
		errs = s.commitBatch(w, batch, errs[:0])
		g.committed(time.Now(), len(batch), lingered)
		if s.ckpt != nil {
			s.ckpt.notify()
		}
		s.answer(w, batch, errs, syncs)
		clear(batch)
		if err := s.fileKeys(w); err != nil {
			s.opts.Logger.Warn("sqlite: filing message numbers in the index failed; they stay in memory and the fill is retried",
				"err", err, "tail", w.seqs.tail.len())
		}
	}
}

// answer answers a committed batch's callers: all at once when it
// committed with synchronous=FULL, and otherwise the ordered requests at
// once and the rest after the syncer's fsync of the WAL. Once an fsync has
// failed, ordered requests wait for the syncer too, which fails them: the
// kernel may have dropped pages, and the pipeline should stop acting on
// writes that may never reach the disk.
func (s *Store) answer(w *writeTx, batch []*request, errs []error, syncs chan<- syncBatch) {
	if w.full {
		for i, r := range batch {
			r.done <- errs[i]
		}
		return
	}
	failed := s.syncFailed.Load()
	var later syncBatch
	for i, r := range batch {
		if r.ordered && !failed {
			r.done <- errs[i]
			continue
		}
		later.reqs = append(later.reqs, r)
		later.errs = append(later.errs, errs[i])
	}
	if len(later.reqs) > 0 {
		syncs <- later
	}
}

// grouping decides when the writer holds a batch open for more requests
// (Options.GroupWait): only while it is busy (the last commit ended less
// than groupBusy ago), and not after groupGiveUp lingers in a row gathered
// nobody (a caller writing alone, back to back, would pay the wait on
// every write) until requests share a batch by themselves again.
type grouping struct {
	wait      time.Duration
	lastEnd   time.Time
	fruitless int
}

func (g *grouping) linger(now time.Time) bool {
	return g.wait > 0 && g.fruitless < groupGiveUp && !g.lastEnd.IsZero() && now.Sub(g.lastEnd) < groupBusy
}

// committed records a batch of size requests that ended at end.
func (g *grouping) committed(end time.Time, size int, lingered bool) {
	g.lastEnd = end
	switch {
	case size > 1:
		g.fruitless = 0
	case lingered:
		g.fruitless++
	}
}

// commitBatch runs every request under its own SAVEPOINT inside one
// transaction: a request that fails rolls back only its own writes. It
// returns one error per request; a failed COMMIT fails all of them.
func (s *Store) commitBatch(w *writeTx, batch []*request, errs []error) []error {
	for range batch {
		errs = append(errs, nil)
	}
	fail := func(err error) []error {
		_, _ = w.conn.ExecContext(context.Background(), "ROLLBACK")
		w.txDone(false)
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	if _, err := w.exec("BEGIN IMMEDIATE"); err != nil {
		return fail(fmt.Errorf("sqlite: begin: %w", wrapErr(err)))
	}
	// Alone on the file (data_version unmoved) there is nothing to catch
	// up with: the ledger's tail is this writer's own.
	others, err := w.checkOthers()
	if err != nil {
		return fail(err)
	}
	if others {
		if err := w.catchUp(); err != nil {
			w.dataVersion = -1 // so that the next transaction catches up
			return fail(err)
		}
	}
	single := len(batch) == 1
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			errs[i] = wrapErr(err)
			continue
		}
		if single {
			// Nothing to protect from this request: a failure rolls back
			// the whole transaction, saving two statements.
			if err := runSafely(w, r.fn); err != nil {
				errs[i] = err
				_, _ = w.conn.ExecContext(context.Background(), "ROLLBACK")
				w.txDone(false)
				return errs
			}
			w.requestDone(true)
			continue
		}
		if r.oneStatement {
			err := runSafely(w, r.fn)
			w.requestDone(err == nil)
			if err == nil {
				continue
			}
			errs[i] = err
			if !refusal(err) {
				// SQLite may have rolled back the transaction, so give up
				// on the whole batch.
				return fail(err)
			}
			continue
		}
		if _, err := w.exec("SAVEPOINT req"); err != nil {
			return fail(fmt.Errorf("sqlite: savepoint: %w", wrapErr(err)))
		}
		err := runSafely(w, r.fn)
		w.requestDone(err == nil)
		if err != nil {
			errs[i] = err
			if _, err := w.exec("ROLLBACK TO req"); err != nil {
				return fail(fmt.Errorf("sqlite: rollback to savepoint: %w", wrapErr(err)))
			}
		}
		if _, err := w.exec("RELEASE req"); err != nil {
			return fail(fmt.Errorf("sqlite: release savepoint: %w", wrapErr(err)))
		}
	}
	if _, err := w.exec("COMMIT"); err != nil {
		return fail(fmt.Errorf("sqlite: commit: %w", wrapErr(err)))
	}
	w.txDone(true)
	return errs
}

// refusal reports whether a one-statement request's error is a refusal
// its statement made without changing anything (a constraint, a missing
// row, a stale fence) rather than a failure of the transaction.
func refusal(err error) bool {
	if errors.Is(err, store.ErrFenced) {
		return true
	}
	code := wamux.ErrorCode(err)
	return code != wamux.EInternal && code != wamux.EUnavailable
}

// runSafely keeps a panicking request from killing the writer and with it
// every other caller.
func runSafely(w *writeTx, fn func(w *writeTx) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sqlite: write request panicked: %v", p)
		}
	}()
	return fn(w)
}

// writeTx is the writer's connection with a cache of prepared statements,
// keyed by SQL text. Multi-row statements come in a few fixed sizes, so the
// cache stays small; it is flushed if it ever grows past max.
type writeTx struct {
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
	max   int
	// args is a reusable argument buffer for multi-row statements; only
	// the writer goroutine touches it.
	args []any
	// seqs caches message numbers (keys.go).
	seqs seqs
	// states are the open transaction's writes that the store's state
	// cache will learn once it commits (statecache.go).
	states pendingStates
	// dataVersion is the connection's PRAGMA data_version when the last
	// transaction began (-1 before the first).
	dataVersion int64
	// full: the connection is known to commit with synchronous=FULL
	// (syncFor).
	full bool
	// catchUpFault, when set (tests, from a write request), is what the
	// next catchUp fails with instead of reading.
	catchUpFault error
}

// syncFor sets the connection's synchronous mode for batch: NORMAL when
// every request in it defers its fsync to the syncer or needs none
// (ordered), FULL otherwise. A failed switch leaves full as it was known;
// a batch committed while full is false is answered only after the
// syncer's fsync (ordered requests: after the commit), whatever the mode
// really was, so a failure costs speed, never durability.
func (w *writeTx) syncFor(batch []*request) {
	deferred := true
	for _, r := range batch {
		deferred = deferred && (r.deferSync || r.ordered)
	}
	if deferred == !w.full {
		return
	}
	mode := "FULL"
	if deferred {
		mode = "NORMAL"
	}
	if _, err := w.conn.ExecContext(context.Background(), "PRAGMA synchronous = "+mode); err != nil {
		if !deferred {
			// Unknown now: answer through the syncer until a switch works.
			w.full = false
		}
		return
	}
	w.full = !deferred
}

// requestDone ends a request of the open transaction: what it learned
// and wrote stays with the transaction, or is dropped with its savepoint.
func (w *writeTx) requestDone(ok bool) {
	w.seqs.requestDone(ok)
	w.states.requestDone(ok)
}

// txDone ends the transaction: after a COMMIT what it learned and wrote
// goes to the caches, after a failure it is dropped.
func (w *writeTx) txDone(committed bool) {
	w.seqs.txDone(committed)
	w.states.txDone(committed)
}

// checkOthers reports whether another connection (so another process:
// the writer is this process's only writing connection) committed since
// the last transaction began, or this is the first, and then forgets the
// cached states; data_version does not move for the connection's own
// commits.
func (w *writeTx) checkOthers() (bool, error) {
	var v int64
	if _, err := w.queryRow("PRAGMA data_version", nil, &v); err != nil {
		return false, fmt.Errorf("sqlite: data version: %w", wrapErr(err))
	}
	if v == w.dataVersion {
		return false, nil
	}
	if w.dataVersion >= 0 {
		w.states.cache.reset()
	}
	w.dataVersion = v
	return true, nil
}

// argBuf returns an empty argument buffer with room for n values.
func (w *writeTx) argBuf(n int) []any {
	if cap(w.args) < n {
		w.args = make([]any, 0, n)
	}
	return w.args[:0]
}

// keepArgs takes a buffer back, dropping its references so the values it
// held can be collected.
func (w *writeTx) keepArgs(args []any) {
	clear(args)
	w.args = args[:0]
}

func newWriteTx(conn *sql.Conn, max int, committed *numbers, tail *keyTail, filter *keyFilter, states *stateCache) *writeTx {
	return &writeTx{conn: conn, stmts: map[string]*sql.Stmt{}, max: max, seqs: newSeqs(committed, tail, filter),
		states: pendingStates{cache: states}, dataVersion: -1, full: true}
}

func (w *writeTx) stmt(query string) (*sql.Stmt, error) {
	if st, ok := w.stmts[query]; ok {
		return st, nil
	}
	if len(w.stmts) >= w.max {
		w.closeStmts()
	}
	st, err := w.conn.PrepareContext(context.Background(), query)
	if err != nil {
		return nil, err
	}
	w.stmts[query] = st
	return st, nil
}

func (w *writeTx) closeStmts() {
	for q, st := range w.stmts {
		_ = st.Close()
		delete(w.stmts, q)
	}
}

func (w *writeTx) exec(query string, args ...any) (sql.Result, error) {
	st, err := w.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(context.Background(), args...)
}

func (w *writeTx) query(query string, args ...any) (*sql.Rows, error) {
	st, err := w.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(context.Background(), args...)
}

// queryRow scans the first row into dest and reports whether there was one.
func (w *writeTx) queryRow(query string, args []any, dest ...any) (bool, error) {
	rows, err := w.query(query, args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return false, rows.Err()
	}
	if err := rows.Scan(dest...); err != nil {
		return false, err
	}
	return true, rows.Close()
}
