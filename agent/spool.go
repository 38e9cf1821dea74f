package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ErrClosed is returned by Report after Close has begun.
var ErrClosed = errors.New("agent: closed")

const (
	segmentSuffix = ".seg"
	ackFile       = "ack"
	// maxGroup bounds how many appends share one write and one fsync.
	maxGroup = 256
)

// segment is one spool file. Its fields are guarded by spool.mu.
type segment struct {
	first uint64 // from the file name: no record in it has a smaller seq
	path  string
	size  int64  // bytes of whole, durable records; reads stop here
	last  uint64 // seq of its last durable record; 0 when it has none
	// sealed: nothing will be appended any more, so the file may be
	// deleted once every record in it is acknowledged.
	sealed bool
}

// spool is the durable queue between Report and the sender: append-only
// segment files written by one goroutine that group-commits concurrent
// appends (one write, one fsync), and an ack file that says how far the
// gateway has acknowledged.
type spool struct {
	dir      string
	segBytes int64
	log      *slog.Logger
	unlock   func() error
	durable  func(n int) // told how many records each successful group made durable

	imu    sync.RWMutex // guards closed against sends on reqs
	closed bool
	reqs   chan *appendReq
	wdone  chan struct{} // closed when the writer has stopped

	mu    sync.Mutex
	segs  []*segment // ordered by first; only the last may be unsealed
	acked uint64

	// Owned by the writer goroutine.
	active  *os.File
	written int64
	nextSeq uint64
	buf     []byte
}

// openSpool locks dir, recovers its segments and ack mark, calls visit for
// every record not yet acknowledged, oldest first, and claims dir for
// account (see claimAccount). The records visited are sent as account's:
// when openSpool fails, none of them may be.
func openSpool(dir, account string, segBytes int64, log *slog.Logger, visit func(record), durable func(n int)) (*spool, error) {
	if err := mkdirDurable(dir); err != nil {
		return nil, err
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	if durable == nil {
		durable = func(int) {}
	}
	s := &spool{dir: dir, segBytes: segBytes, log: log, unlock: unlock, durable: durable}
	pending := 0
	if err := s.recover(func(r record) { pending++; visit(r) }); err != nil {
		_ = unlock()
		return nil, err
	}
	if err := s.claimAccount(account, pending); err != nil {
		_ = unlock()
		return nil, err
	}
	s.reqs = make(chan *appendReq, maxGroup)
	s.wdone = make(chan struct{})
	go s.runWriter()
	return s, nil
}

// recover reads the ack mark and scans every segment. Torn or corrupt
// tails are skipped with a warning; segments with nothing left to send
// are deleted.
func (s *spool) recover(visit func(record)) error {
	acked, err := s.readAck()
	if err != nil {
		return err
	}
	s.acked = acked
	names, err := filepath.Glob(filepath.Join(s.dir, "*"+segmentSuffix))
	if err != nil {
		return fmt.Errorf("agent: list spool: %w", err)
	}
	maxSeq := acked
	for _, path := range names {
		first, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(path), segmentSuffix), 10, 64)
		if err != nil || first == 0 {
			s.log.Warn("agent: ignoring stray file in spool dir", "file", path)
			continue
		}
		seg := &segment{first: first, path: path, sealed: true}
		if err := s.scan(seg, visit); err != nil {
			return err
		}
		s.segs = append(s.segs, seg)
		maxSeq = max(maxSeq, seg.last, first-1)
	}
	slices.SortFunc(s.segs, func(a, b *segment) int {
		if a.first < b.first {
			return -1
		}
		if a.first > b.first {
			return 1
		}
		return 0
	})
	s.nextSeq = maxSeq + 1
	return s.prune()
}

// scan decodes seg from the start, sets its size and last, and visits its
// unacknowledged records.
func (s *spool) scan(seg *segment, visit func(record)) error {
	data, err := os.ReadFile(seg.path)
	if err != nil {
		return fmt.Errorf("agent: read spool segment: %w", err)
	}
	off, unacked := 0, false
	for off < len(data) {
		r, n, err := decodeRecord(data[off:])
		if errors.Is(err, errBadContent) {
			// Written whole and fsynced, so not a torn tail: skip this one
			// record, not the ones after it.
			s.log.Error("agent: skipping an unreadable spool record",
				"segment", filepath.Base(seg.path), "offset", off, "bytes", n)
			off += n
			continue
		}
		if err != nil {
			// Only the record being written when the process died can be
			// torn, and its Report never returned; anything else here is
			// damage we cannot resynchronise past.
			s.log.Warn("agent: skipping torn or corrupt spool tail",
				"segment", filepath.Base(seg.path), "offset", off, "bytes", len(data)-off, "err", err)
			break
		}
		off += n
		seg.last = r.Seq
		if r.Seq > s.acked {
			unacked = true
			visit(r)
		}
	}
	seg.size = int64(off)
	if unacked {
		// After a kill -9 the tail written before the crash is readable
		// from the page cache but may never have been fsynced (its
		// Reports had not returned). Its records are now sent, and a
		// Report of one of them is dropped as a repeat, that is,
		// acknowledged: it must survive a power loss from here on.
		if err := syncFile(seg.path); err != nil {
			return fmt.Errorf("agent: sync spool segment: %w", err)
		}
	}
	return nil
}

func (s *spool) readAck() (uint64, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, ackFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("agent: read spool ack: %w", err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		// The ack file is replaced by rename, so this is outside damage.
		// Starting from zero re-sends what is spooled: duplicates, no loss.
		s.log.Warn("agent: spool ack file unreadable, re-sending the whole spool", "err", err)
		return 0, nil
	}
	return n, nil
}

// ack records durably that every record up to seq is acknowledged, then
// deletes the segments that hold nothing else.
func (s *spool) ack(seq uint64) error {
	tmp := filepath.Join(s.dir, ackFile+".tmp")
	if err := writeFileSync(tmp, []byte(strconv.FormatUint(seq, 10)+"\n")); err != nil {
		return fmt.Errorf("agent: write spool ack: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, ackFile)); err != nil {
		return fmt.Errorf("agent: write spool ack: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		return err
	}
	s.mu.Lock()
	s.acked = max(s.acked, seq)
	s.mu.Unlock()
	return s.prune()
}

// prune deletes sealed segments with nothing unacknowledged in them. A
// deleted file that comes back after a crash holds only acked records,
// which are skipped, so the directory is not synced here.
func (s *spool) prune() error {
	s.mu.Lock()
	var drop []string
	keep := s.segs[:0]
	for _, seg := range s.segs {
		if seg.sealed && seg.last <= s.acked {
			drop = append(drop, seg.path)
			continue
		}
		keep = append(keep, seg)
	}
	clear(s.segs[len(keep):])
	s.segs = keep
	s.mu.Unlock()
	var errs []error
	for _, p := range drop {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("agent: delete acked spool segment: %w", err))
		}
	}
	return errors.Join(errs...)
}

// pending reports whether a durable record is not acknowledged yet.
func (s *spool) pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, seg := range s.segs {
		if seg.last > s.acked {
			return true
		}
	}
	return false
}

// closeIntake stops new appends and waits until those already queued are
// written.
func (s *spool) closeIntake() {
	s.imu.Lock()
	if !s.closed {
		s.closed = true
		close(s.reqs)
	}
	s.imu.Unlock()
	<-s.wdone
}

// close stops intake, deletes what is fully acknowledged and releases the
// directory.
func (s *spool) close() error {
	s.closeIntake()
	return errors.Join(s.prune(), s.unlock())
}
