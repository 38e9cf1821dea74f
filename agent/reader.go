package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// readChunk is how much of a segment one read syscall fetches; it holds
// many records and at least one of the largest.
const readChunk = 256 << 10

// cursor is a position in the spool: a segment (by its first seq) and a
// byte offset in it. The zero cursor is the start of the spool.
type cursor struct {
	seg uint64
	off int64
}

// read returns up to max durable, unacknowledged records from cur on, and
// the position after them. Reading never blocks the writer: it works on a
// snapshot of the segment list and reads only bytes already fsynced.
func (s *spool) read(cur cursor, max int) ([]record, cursor, error) {
	type view struct {
		first uint64
		path  string
		size  int64
	}
	s.mu.Lock()
	views := make([]view, 0, len(s.segs))
	for _, seg := range s.segs {
		if seg.first >= cur.seg {
			views = append(views, view{seg.first, seg.path, seg.size})
		}
	}
	acked := s.acked
	s.mu.Unlock()

	var out []record
	for i, v := range views {
		off := int64(0)
		if v.first == cur.seg {
			off = cur.off
		}
		recs, next, err := readSegment(v.path, off, v.size, max-len(out), acked)
		out = append(out, recs...)
		cur = cursor{seg: v.first, off: next}
		if errors.Is(err, errBadRecord) {
			// Bytes that were durable and whole when written no longer
			// decode: the disk or someone else damaged them. Give up on the
			// rest of what this segment holds so far rather than stop.
			s.log.Error("agent: spool segment damaged, skipping the rest of it",
				"segment", filepath.Base(v.path), "offset", next, "bytes", v.size-next)
			cur.off = v.size
			continue
		}
		if err != nil {
			return out, cur, err
		}
		if len(out) == max {
			break
		}
		if next == v.size && i+1 < len(views) {
			cur = cursor{seg: views[i+1].first}
		}
	}
	return out, cur, nil
}

// readSegment decodes records of the file at path between off and size.
func readSegment(path string, off, size int64, max int, acked uint64) ([]record, int64, error) {
	if off >= size || max <= 0 {
		return nil, off, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, off, fmt.Errorf("agent: read spool segment: %w", err)
	}
	defer f.Close()
	var out []record
	buf := make([]byte, min(size-off, readChunk))
	for off < size && len(out) < max {
		b := buf[:min(size-off, int64(len(buf)))]
		if _, err := f.ReadAt(b, off); err != nil {
			return out, off, fmt.Errorf("agent: read spool segment: %w", err)
		}
		p := 0
		for p < len(b) && len(out) < max {
			r, n, err := decodeRecord(b[p:])
			if errors.Is(err, errShortRecord) && p > 0 {
				break // the record continues in the next chunk
			}
			if errors.Is(err, errBadContent) {
				p += n // whole but unreadable: skip it alone (recovery logs it)
				continue
			}
			if err != nil {
				return out, off + int64(p), fmt.Errorf("agent: %s at %d: %w", filepath.Base(path), off+int64(p), errBadRecord)
			}
			p += n
			if r.Seq > acked {
				out = append(out, r)
			}
		}
		off += int64(p)
	}
	return out, off, nil
}
