package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// The receipt log (store.PipelineStore) is stored as entries: one row per
// append holding all of its receipts (migration 0070 says why). A receipt's
// log id is its entry id << logIndexBits | its position in the entry, so
// ids still grow with every append and order the receipts as appended.
//
// Acknowledgements are kept in memory per entry, and an entry is deleted
// once every receipt in it is acknowledged. After a restart the entries
// still in the table are read back whole, including receipts acknowledged
// before the crash: the pipeline then processes them again, which changes
// nothing (merging is idempotent and the receipt's unique key makes the
// second insert a no-op), so durability is kept at the price of repeating
// at most the entries that were in flight.
const (
	logIndexBits = 16
	// maxEntryReceipts caps one entry, within the index bits.
	maxEntryReceipts = 8192
)

// logID is the log id of the receipt at position i of entry e.
func logID(entry int64, i int) int64 { return entry<<logIndexBits | int64(i) }

// splitLogID is logID's inverse.
func splitLogID(id int64) (entry int64, i int) {
	return id >> logIndexBits, int(id & (1<<logIndexBits - 1))
}

// logAcks tracks acknowledgements of the entries this process has seen.
type logAcks struct {
	mu      sync.Mutex
	entries map[int64]*entryAcks
	// undeleted are fully acknowledged entries whose delete failed; the
	// next acknowledgement tries again.
	undeleted []int64
}

// entryAcks is one entry's acknowledgement state.
type entryAcks struct {
	size  int
	acked []uint64 // bit i: receipt i is acknowledged
	left  int      // receipts not yet acknowledged
}

func newEntryAcks(size int) *entryAcks {
	return &entryAcks{size: size, acked: make([]uint64, (size+63)/64), left: size}
}

func (e *entryAcks) isAcked(i int) bool { return e.acked[i/64]&(1<<(i%64)) != 0 }

func (e *entryAcks) set(i int) {
	e.acked[i/64] |= 1 << (i % 64)
	e.left--
}

// ackedLocked reports whether the receipt with log id id is acknowledged.
// The caller holds mu.
func (l *logAcks) ackedLocked(id int64) bool {
	entry, i := splitLogID(id)
	e, ok := l.entries[entry]
	return ok && i < e.size && e.isAcked(i)
}

// AppendReceiptLog stores the receipts as one entry (or several, past
// maxEntryReceipts), encoded before the writer is asked, so the writer
// binds one value per entry.
func (s *Store) AppendReceiptLog(ctx context.Context, rs []wamux.Receipt) ([]int64, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	if err := validateReceipts(rs); err != nil {
		return nil, err
	}
	now := ms(s.now())
	var datas [][]byte
	for start := 0; start < len(rs); start += maxEntryReceipts {
		datas = append(datas, encodeLogEntry(rs[start:min(start+maxEntryReceipts, len(rs))], now))
	}
	ids := make([]int64, len(rs))
	var registered []int64
	err := s.write(ctx, func(w *writeTx) error {
		registered = registered[:0]
		for k, data := range datas {
			start := k * maxEntryReceipts
			n := min(maxEntryReceipts, len(rs)-start)
			res, err := w.exec(`INSERT INTO receipt_log_entries (receipts, data) VALUES (?, ?)`, n, data)
			if err != nil {
				return fmt.Errorf("sqlite: append receipt log: %w", wrapErr(err))
			}
			entry, err := res.LastInsertId()
			if err != nil {
				return fmt.Errorf("sqlite: append receipt log: %w", err)
			}
			for i := 0; i < n; i++ {
				ids[start+i] = logID(entry, i)
			}
			// Registered before the commit, so that a reader listing
			// the entry the moment it is committed finds it here when
			// its receipts are acknowledged. Nobody can hold an id of
			// it before then; an entry of a rolled-back append whose id
			// is reused is simply replaced.
			s.logAcks.mu.Lock()
			s.logAcks.entries[entry] = newEntryAcks(n)
			s.logAcks.mu.Unlock()
			registered = append(registered, entry)
		}
		return nil
	})
	if err != nil {
		s.logAcks.mu.Lock()
		for _, entry := range registered {
			if e, ok := s.logAcks.entries[entry]; ok && e.left == e.size {
				delete(s.logAcks.entries, entry)
			}
		}
		s.logAcks.mu.Unlock()
		return nil, err
	}
	return ids, nil
}

// ListReceiptLog decodes entries in id order, from the entry of afterID
// on, skipping acknowledged receipts.
func (s *Store) ListReceiptLog(ctx context.Context, afterID int64, limit int) ([]store.LoggedReceipt, error) {
	limit = store.ListLimit(limit)
	afterEntry, _ := splitLogID(max(afterID, 0))
	var out []store.LoggedReceipt
	for len(out) < limit {
		rows, err := s.rquery(ctx, `SELECT id, data FROM receipt_log_entries WHERE id >= ? ORDER BY id LIMIT 64`, afterEntry)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list receipt log: %w", wrapErr(err))
		}
		type entry struct {
			id   int64
			data []byte
		}
		var page []entry
		for rows.Next() {
			var e entry
			if err := rows.Scan(&e.id, &e.data); err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlite: list receipt log: %w", err)
			}
			page = append(page, e)
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlite: list receipt log: %w", wrapErr(err))
		}
		rows.Close()
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			rs, err := decodeLogEntry(e.data)
			if err != nil {
				return nil, fmt.Errorf("sqlite: list receipt log: entry %d: %w", e.id, err)
			}
			s.logAcks.mu.Lock()
			for i := range rs {
				id := logID(e.id, i)
				if id > afterID && !s.logAcks.ackedLocked(id) && len(out) < limit {
					out = append(out, store.LoggedReceipt{ID: id, Receipt: rs[i]})
				}
			}
			s.logAcks.mu.Unlock()
		}
		afterEntry = page[len(page)-1].id + 1
	}
	return out, nil
}

// AckReceiptLog marks receipts acknowledged and deletes the entries that
// became fully acknowledged. A mark needs no write: the pipeline
// acknowledges only what it has durably processed, and the delete is only
// garbage collection. So once marked, an acknowledgement stands even if
// the delete fails; the entry is then deleted by a later call (or, after a
// crash, read back and processed again, harmlessly), and the count is
// returned without an error, since the receipts are done.
func (s *Store) AckReceiptLog(ctx context.Context, ids []int64) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	acks := &s.logAcks
	marked := 0
	var done []int64
	for _, id := range ids {
		entry, i := splitLogID(id)
		acks.mu.Lock()
		e, known := acks.entries[entry]
		acks.mu.Unlock()
		if !known {
			// Appended before this process started, or not at all.
			var size int
			err := s.rqueryRow(ctx, `SELECT receipts FROM receipt_log_entries WHERE id = ?`, entry).Scan(&size)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return marked, fmt.Errorf("sqlite: ack receipt log: %w", wrapErr(err))
			}
			acks.mu.Lock()
			if e, known = acks.entries[entry]; !known {
				e = newEntryAcks(size)
				acks.entries[entry] = e
			}
			acks.mu.Unlock()
		}
		acks.mu.Lock()
		if i < e.size && !e.isAcked(i) {
			e.set(i)
			marked++
			if e.left == 0 {
				done = append(done, entry)
			}
		}
		acks.mu.Unlock()
	}
	acks.mu.Lock()
	done = append(done, acks.undeleted...)
	acks.undeleted = nil
	acks.mu.Unlock()
	if len(done) == 0 {
		return marked, nil
	}
	err := s.write(ctx, func(w *writeTx) error {
		for start := 0; start < len(done); start += maxKeyRows {
			chunk := done[start:min(start+maxKeyRows, len(done))]
			rows := padRows(len(chunk))
			args := make([]any, rows)
			for i := range args {
				args[i] = chunk[min(i, len(chunk)-1)]
			}
			if _, err := w.exec(`DELETE FROM receipt_log_entries WHERE id IN (`+placeholders(rows)+`)`, args...); err != nil {
				return fmt.Errorf("sqlite: ack receipt log: %w", wrapErr(err))
			}
		}
		return nil
	})
	acks.mu.Lock()
	defer acks.mu.Unlock()
	if err != nil {
		acks.undeleted = append(acks.undeleted, done...)
		return marked, nil
	}
	for _, entry := range done {
		delete(acks.entries, entry)
	}
	return marked, nil
}

// encodeLogEntry writes receipts as a JSON array of arrays, in the column
// order of migration 0070 (which builds the same shape from old rows).
// Written by hand: encoding/json would reflect over each receipt on the
// appender's path.
func encodeLogEntry(rs []wamux.Receipt, now int64) []byte {
	b := make([]byte, 0, len(rs)*128)
	b = append(b, '[')
	for i := range rs {
		r := &rs[i]
		if i > 0 {
			b = append(b, ',')
		}
		received := ms(r.ReceivedAt)
		if received == 0 {
			received = now
		}
		b = appendJSONString(append(b, '['), r.MessageID)
		for _, f := range [...]logField{{s: r.AccountID}, {s: string(r.Type)}, {n: ms(r.EventTime), num: true},
			{s: r.CallbackData}, {s: r.Recipient}, {n: int64(r.ErrorCode), num: true}, {s: r.ErrorTitle},
			{s: r.Source}, {n: received, num: true}} {
			if f.num {
				b = strconv.AppendInt(append(b, ','), f.n, 10)
			} else {
				b = appendJSONString(append(b, ','), f.s)
			}
		}
		b = append(b, ']')
	}
	return append(b, ']')
}

// logField is one field after the first of an encoded receipt: a string,
// or a number when num is set.
type logField struct {
	s   string
	n   int64
	num bool
}

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// decodeLogEntry reads what encodeLogEntry (or migration 0070) wrote.
func decodeLogEntry(data []byte) ([]wamux.Receipt, error) {
	var rows [][]json.RawMessage
	if err := json.Unmarshal(data, &rows); err != nil {
		return nil, fmt.Errorf("decode receipt log entry: %w", err)
	}
	out := make([]wamux.Receipt, len(rows))
	for i, row := range rows {
		if len(row) != 10 {
			return nil, fmt.Errorf("decode receipt log entry: receipt %d has %d fields, want 10", i, len(row))
		}
		r := &out[i]
		var typ string
		var event, received int64
		for j, dst := range []any{&r.MessageID, &r.AccountID, &typ, &event, &r.CallbackData, &r.Recipient,
			&r.ErrorCode, &r.ErrorTitle, &r.Source, &received} {
			if err := json.Unmarshal(row[j], dst); err != nil {
				return nil, fmt.Errorf("decode receipt log entry: receipt %d field %d: %w", i, j, err)
			}
		}
		r.Type, r.EventTime, r.ReceivedAt = wamux.ReceiptType(typ), fromMS(event), fromMS(received)
	}
	return out, nil
}
