package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Deferred syncs. With synchronous=FULL, every COMMIT of the writer ends
// with an fsync of the WAL, and the writer waits for it before it can
// start the next transaction. The receipt pipeline's writes need less
// than that:
//   - its log appends (request.deferSync) need that their callers are
//     answered only once durable, not that the writer waits;
//   - its merges (receipts and states) and log acks (request.ordered)
//     need only to be committed, and never to survive a crash that loses
//     a commit made before them.
//
// So a batch made only of such requests commits with synchronous=NORMAL,
// which writes the WAL frames without an fsync; its ordered requests are
// answered at once, and the rest is handed to the syncer goroutine, which
// fsyncs the WAL file and then answers them while the writer goes on with
// the next transaction. An fsync covers every frame written before it, so
// one covers all the batches waiting, in commit order, and SQLite's WAL
// recovery keeps a prefix of the commits: nothing answered after an fsync
// can be lost, and a later commit never survives an earlier one.
//
// That prefix is what the ordered writes rely on. A merge is followed by
// the log ack of its receipts, so a crash that loses the merge loses the
// ack too, and the log entries are processed again at Start (merging is
// idempotent); whatever else acts on a merge (the outbound side's status
// updates) commits with FULL and so makes it durable first. So merges need
// no fsync of their own, and the log appends, which a webhook's answer
// waits for, do not queue behind them in the syncer.
//
// The difference with FULL is only what a reader sees meanwhile: a
// deferred or ordered batch's rows are visible to other connections before
// the fsync. Only the receipt pipeline's own data goes this way, and the
// pipeline tolerates it (a power loss loses the same prefix of log and
// merge, and unanswered log appends are redelivered); every other write
// (messages, accounts, sequences: anything a dispatcher may act on
// outside) still commits with synchronous=FULL, durable before visible,
// which also makes every earlier batch durable.

// syncBatch is a committed batch whose callers wait for the WAL's fsync.
type syncBatch struct {
	reqs []*request
	errs []error
}

// walSyncer fsyncs the WAL file through a descriptor of its own, opened on
// first use and again should the file at the path ever be another one.
type walSyncer struct {
	path string
	f    *os.File
	// sync is syncData (fdatasync where there is one); tests replace it.
	sync func(*os.File) error
	// failed is the first fsync error, returned for good after it: the
	// kernel may have dropped the pages that did not reach the disk and
	// report the next fsync successful, while WAL recovery would stop at
	// the frames lost. Only a restart (SQLite recovering the WAL) knows
	// what is durable again.
	failed error
}

func newWALSyncer(dbPath string) *walSyncer {
	return &walSyncer{path: dbPath + "-wal", sync: syncData}
}

// syncWAL makes every WAL frame written so far durable.
func (ws *walSyncer) syncWAL() error {
	if ws.failed != nil {
		return ws.failed
	}
	if err := ws.syncOnce(); err != nil {
		ws.failed = err
		return err
	}
	return nil
}

func (ws *walSyncer) syncOnce() error {
	fi, err := os.Stat(ws.path)
	if err != nil {
		return err
	}
	if ws.f != nil {
		if cur, err := ws.f.Stat(); err != nil || !os.SameFile(cur, fi) {
			_ = ws.f.Close()
			ws.f = nil
		}
	}
	if ws.f == nil {
		f, err := os.Open(ws.path)
		if err != nil {
			return err
		}
		// A WAL file SQLite has just created: its directory entry too.
		if err := syncDir(filepath.Dir(ws.path)); err != nil {
			_ = f.Close()
			return err
		}
		ws.f = f
	}
	return ws.sync(ws.f)
}

func (ws *walSyncer) close() error {
	if ws.f == nil {
		return nil
	}
	err := ws.f.Close()
	ws.f = nil
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

// runSyncer answers the callers of deferred batches after an fsync of the
// WAL that covers them, taking every batch waiting for one fsync. It
// returns when in is closed and drained.
func (s *Store) runSyncer(in <-chan syncBatch, done chan<- struct{}) {
	defer close(done)
	var pending []syncBatch
	for b := range in {
		pending = append(pending[:0], b)
	more:
		for {
			select {
			case b, ok := <-in:
				if !ok {
					break more
				}
				pending = append(pending, b)
			default:
				break more
			}
		}
		failedBefore := s.wal.failed != nil
		err := s.wal.syncWAL()
		if err != nil {
			s.syncFailed.Store(true)
			if !failedBefore {
				s.opts.Logger.Error("sqlite: fsync of the WAL failed; the receipt pipeline's writes fail until a restart", "err", err)
			}
			err = fmt.Errorf("sqlite: sync the WAL: %w", err)
		}
		for _, p := range pending {
			for i, r := range p.reqs {
				e := p.errs[i]
				if e == nil {
					e = err
				}
				r.done <- e
			}
		}
		clear(pending)
	}
}
