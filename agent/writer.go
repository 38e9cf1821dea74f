package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// appendReq is one Report waiting for its record to be durable.
type appendReq struct {
	rec  record
	done chan error // buffered: the writer never blocks on a caller
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
		err = fsyncFile(s.active)
	}
	if err != nil {
		// What reached the file is unknown now, so nothing more goes into
		// it. Its seqs stay used: if some of it did reach the disk it is
		// sent after a restart, which at-least-once allows.
		s.abandonActive()
		return fmt.Errorf("agent: spool write: %w", err)
	}
	s.written += int64(len(s.buf))
	s.mu.Lock()
	seg := s.segs[len(s.segs)-1]
	seg.size = s.written
	seg.last = s.nextSeq - 1
	s.mu.Unlock()
	// Counted once readable (a kick then finds them all), whether or not
	// their callers still wait.
	s.durable(len(group))
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

// abandonActive ends the active segment after a failed write. One that
// holds no durable record is deleted rather than sealed: otherwise every
// Report retried on a full disk would leave a file (and a segment to scan)
// behind until the next ack. Its name need not be synced away; should it
// come back after a crash it holds only records whose Reports failed.
func (s *spool) abandonActive() {
	if s.active == nil || s.written > 0 {
		s.sealActive()
		return
	}
	path := s.active.Name()
	if err := s.active.Close(); err != nil {
		s.log.Warn("agent: close spool segment", "err", err)
	}
	s.active = nil
	s.mu.Lock()
	s.segs[len(s.segs)-1] = nil
	s.segs = s.segs[:len(s.segs)-1]
	s.mu.Unlock()
	if err := os.Remove(path); err != nil {
		s.log.Warn("agent: delete failed spool segment", "err", err)
	}
}
