package agent

import (
	"context"
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

// appendReq is one Report waiting for its record to be durable.
type appendReq struct {
	rec  record
	done chan error // buffered: the writer never blocks on a caller
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

// openSpool locks dir, recovers its segments and ack mark, and calls
// visit for every record not yet acknowledged, oldest first.
func openSpool(dir string, segBytes int64, log *slog.Logger, visit func(record)) (*spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent: create spool dir: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s := &spool{dir: dir, segBytes: segBytes, log: log, unlock: unlock}
	if err := s.recover(visit); err != nil {
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
	off := 0
	for off < len(data) {
		r, n, err := decodeRecord(data[off:])
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
			visit(r)
		}
	}
	seg.size = int64(off)
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

// append makes rec durable and returns once it is fsynced. When ctx ends
// first the record may still become durable and be sent later.
func (s *spool) append(ctx context.Context, rec record) error {
	done, err := s.enqueue(ctx, rec)
	if err != nil {
		return err
	}
	return wait(ctx, done)
}

// enqueue hands rec to the writer; the returned channel yields the outcome
// of its write. Appends enqueued together share a write and an fsync.
func (s *spool) enqueue(ctx context.Context, rec record) (<-chan error, error) {
	req := &appendReq{rec: rec, done: make(chan error, 1)}
	s.imu.RLock()
	defer s.imu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	select {
	case s.reqs <- req:
		return req.done, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("agent: report: %w", ctx.Err())
	}
}

func wait(ctx context.Context, done <-chan error) error {
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("agent: report: %w", ctx.Err())
	}
}

func (s *spool) runWriter() {
	defer close(s.wdone)
	group := make([]*appendReq, 0, maxGroup)
	for req := range s.reqs {
		group = append(group[:0], req)
	more:
		for len(group) < maxGroup {
			select {
			case r, ok := <-s.reqs:
				if !ok {
					break more
				}
				group = append(group, r)
			default:
				break more
			}
		}
		err := s.writeGroup(group)
		for _, r := range group {
			r.done <- err
		}
	}
	s.sealActive()
}

// writeGroup writes the records of group with one write and one fsync.
func (s *spool) writeGroup(group []*appendReq) error {
	if s.active == nil {
		if err := s.startSegment(); err != nil {
			return err
		}
	}
	s.buf = s.buf[:0]
	for _, r := range group {
		r.rec.Seq = s.nextSeq
		var err error
		if s.buf, err = appendRecord(s.buf, r.rec); err != nil {
			return err
		}
		s.nextSeq++
	}
	_, err := s.active.Write(s.buf)
	if err == nil {
		err = s.active.Sync()
	}
	if err != nil {
		// What reached the file is unknown now, so nothing more goes into
		// it. Its seqs stay used: if some of it did reach the disk it is
		// sent after a restart, which at-least-once allows.
		s.sealActive()
		return fmt.Errorf("agent: spool write: %w", err)
	}
	s.written += int64(len(s.buf))
	s.mu.Lock()
	seg := s.segs[len(s.segs)-1]
	seg.size = s.written
	seg.last = s.nextSeq - 1
	s.mu.Unlock()
	if s.written >= s.segBytes {
		s.sealActive()
	}
	return nil
}

// startSegment creates the next segment file, named after the next seq.
func (s *spool) startSegment() error {
	path := filepath.Join(s.dir, fmt.Sprintf("%020d%s", s.nextSeq, segmentSuffix))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("agent: create spool segment: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return err
	}
	s.active, s.written = f, 0
	s.mu.Lock()
	s.segs = append(s.segs, &segment{first: s.nextSeq, path: path})
	s.mu.Unlock()
	return nil
}

func (s *spool) sealActive() {
	if s.active == nil {
		return
	}
	if err := s.active.Close(); err != nil {
		s.log.Warn("agent: close spool segment", "err", err)
	}
	s.active = nil
	s.mu.Lock()
	s.segs[len(s.segs)-1].sealed = true
	s.mu.Unlock()
}

// ack records durably that every record up to seq is acknowledged, then
// deletes the segments that holds nothing else.
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

func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// syncDir makes created, renamed and removed names in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("agent: sync spool dir: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("agent: sync spool dir: %w", err)
	}
	return nil
}
