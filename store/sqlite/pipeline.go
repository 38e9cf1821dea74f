package sqlite

import (
	"context"
	"fmt"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// maxLogRows bounds one multi-row log insert (11 columns) under SQLite's
// bound-variable limit.
const maxLogRows = 1024

// AppendReceiptLog inserts the receipts in statements whose sizes are
// powers of two (so few statement texts exist, and no row is padded: a
// padded log row would be a second copy). The single writer makes the ids
// of one statement consecutive, ending at last_insert_rowid.
func (s *Store) AppendReceiptLog(ctx context.Context, rs []wamux.Receipt) ([]int64, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	if err := validateReceipts(rs); err != nil {
		return nil, err
	}
	ids := make([]int64, len(rs))
	now := ms(s.now())
	err := s.write(ctx, func(w *writeTx) error {
		args := make([]any, 0, min(len(rs), maxLogRows)*(receiptColCount))
		for start := 0; start < len(rs); {
			n := chunkRows(len(rs)-start, maxLogRows)
			args = args[:0]
			for i := start; i < start+n; i++ {
				r := &rs[i]
				received := ms(r.ReceivedAt)
				if received == 0 {
					received = now
				}
				args = append(args, r.MessageID, r.AccountID, string(r.Type), ms(r.EventTime), r.CallbackData,
					r.Recipient, r.ErrorCode, r.ErrorTitle, r.Source, received)
			}
			res, err := w.exec(multiInsert("INSERT INTO receipt_log ("+receiptCols+") VALUES ", receiptColCount, n, ""), args...)
			if err != nil {
				return fmt.Errorf("sqlite: append receipt log: %w", wrapErr(err))
			}
			last, err := res.LastInsertId()
			if err != nil {
				return fmt.Errorf("sqlite: append receipt log: %w", err)
			}
			for i := 0; i < n; i++ {
				ids[start+i] = last - int64(n-1-i)
			}
			start += n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// chunkRows is the largest power of two not above n (and not above max).
func chunkRows(n, max int) int {
	p := 1
	for p*2 <= n && p*2 <= max {
		p *= 2
	}
	return p
}

// ListReceiptLog reads the log in id order.
func (s *Store) ListReceiptLog(ctx context.Context, afterID int64, limit int) ([]store.LoggedReceipt, error) {
	limit = store.ListLimit(limit)
	rows, err := s.rdb.QueryContext(ctx, `SELECT id, `+receiptCols+` FROM receipt_log WHERE id > ? ORDER BY id LIMIT ?`, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list receipt log: %w", wrapErr(err))
	}
	defer rows.Close()
	var out []store.LoggedReceipt
	for rows.Next() {
		var l store.LoggedReceipt
		if err := scanReceipt(idScanner{rows, &l.ID}, &l.Receipt); err != nil {
			return nil, fmt.Errorf("sqlite: list receipt log: %w", err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list receipt log: %w", wrapErr(err))
	}
	return out, nil
}

// idScanner prepends the log id to a receipt scan.
type idScanner struct {
	sc scanner
	id *int64
}

func (i idScanner) Scan(dest ...any) error {
	return i.sc.Scan(append([]any{i.id}, dest...)...)
}

// AckReceiptLog deletes by id in padded IN lists (a repeated id is
// harmless there).
func (s *Store) AckReceiptLog(ctx context.Context, ids []int64) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	var deleted int
	err := s.write(ctx, func(w *writeTx) error {
		deleted = 0
		args := make([]any, 0, min(padRows(len(ids)), maxKeyRows))
		for start := 0; start < len(ids); start += maxKeyRows {
			chunk := ids[start:min(start+maxKeyRows, len(ids))]
			rows := padRows(len(chunk))
			args = args[:0]
			for i := 0; i < rows; i++ {
				args = append(args, chunk[min(i, len(chunk)-1)])
			}
			res, err := w.exec(`DELETE FROM receipt_log WHERE id IN (`+placeholders(rows)+`)`, args...)
			if err != nil {
				return fmt.Errorf("sqlite: ack receipt log: %w", wrapErr(err))
			}
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("sqlite: ack receipt log: %w", err)
			}
			deleted += int(n)
		}
		return nil
	})
	return deleted, err
}

// FindMessages looks messages up by wamid and by msg_id in chunks.
func (s *Store) FindMessages(ctx context.Context, wamids, msgIDs []string) ([]wamux.Message, error) {
	var out []wamux.Message
	seen := map[string]bool{}
	for _, q := range []struct {
		col  string
		vals []string
	}{{"wamid", wamids}, {"msg_id", msgIDs}} {
		for start := 0; start < len(q.vals); start += maxKeyRows {
			chunk := q.vals[start:min(start+maxKeyRows, len(q.vals))]
			rows := padRows(len(chunk))
			args := make([]any, rows)
			for i := range args {
				args[i] = chunk[min(i, len(chunk)-1)]
			}
			res, err := s.rdb.QueryContext(ctx, `SELECT `+messageCols+` FROM messages WHERE `+q.col+` IN (`+placeholders(rows)+`)`, args...)
			if err != nil {
				return nil, fmt.Errorf("sqlite: find messages: %w", wrapErr(err))
			}
			for res.Next() {
				m, err := scanMessage(res)
				if err != nil {
					res.Close()
					return nil, fmt.Errorf("sqlite: find messages: %w", err)
				}
				if !seen[m.ID] {
					seen[m.ID] = true
					out = append(out, m)
				}
			}
			if err := res.Err(); err != nil {
				res.Close()
				return nil, fmt.Errorf("sqlite: find messages: %w", wrapErr(err))
			}
			res.Close()
		}
	}
	return out, nil
}

// AddInboundMessages inserts with ON CONFLICT DO NOTHING; the rows changed
// are the new ones.
func (s *Store) AddInboundMessages(ctx context.Context, msgs []store.InboundMessage) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	for i := range msgs {
		if msgs[i].AccountID == "" || msgs[i].WAMID == "" {
			return 0, wamux.Errorf(wamux.EInvalid, "inbound message %d needs account_id and wamid", i)
		}
	}
	now := ms(s.now())
	var added int
	err := s.write(ctx, func(w *writeTx) error {
		added = 0
		for i := range msgs {
			m := &msgs[i]
			received := ms(m.ReceivedAt)
			if received == 0 {
				received = now
			}
			res, err := w.exec(`INSERT INTO inbound_messages (account_id, wamid, type, sent_at, received_at)
				VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING`, m.AccountID, m.WAMID, m.Type, ms(m.SentAt), received)
			if err != nil {
				return fmt.Errorf("sqlite: add inbound messages: %w", wrapErr(err))
			}
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("sqlite: add inbound messages: %w", err)
			}
			added += int(n)
		}
		return nil
	})
	return added, err
}
