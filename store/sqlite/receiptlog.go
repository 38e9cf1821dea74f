package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/receiptlog"
)

// The receipt log (store.PipelineStore) is stored as entries, one row per
// append (package receiptlog; migration 0070 moved the per-receipt rows).

// AppendReceiptLog stores the receipts as one entry (or several, past
// receiptlog.MaxEntry), encoded before the writer is asked, so the writer
// binds one value per entry.
func (s *Store) AppendReceiptLog(ctx context.Context, rs []wamux.Receipt) ([]int64, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	if err := validateReceipts(rs); err != nil {
		return nil, err
	}
	now := ms(s.now())
	chunks := receiptlog.Chunks(rs)
	datas := make([][]byte, len(chunks))
	for k, c := range chunks {
		datas[k] = receiptlog.Encode(c, now)
	}
	ids := make([]int64, 0, len(rs))
	var registered []int64
	err := s.write(ctx, func(w *writeTx) error {
		ids, registered = ids[:0], registered[:0]
		for k, data := range datas {
			res, err := w.exec(`INSERT INTO receipt_log_entries (receipts, data) VALUES (?, ?)`, len(chunks[k]), data)
			if err != nil {
				return fmt.Errorf("sqlite: append receipt log: %w", wrapErr(err))
			}
			entry, err := res.LastInsertId()
			if err != nil {
				return fmt.Errorf("sqlite: append receipt log: %w", err)
			}
			for i := range chunks[k] {
				ids = append(ids, receiptlog.ID(entry, i))
			}
			s.logAcks.Register(entry, len(chunks[k]))
			registered = append(registered, entry)
		}
		return nil
	})
	if err != nil {
		s.logAcks.Forget(registered)
		return nil, err
	}
	return ids, nil
}

// ListReceiptLog decodes entries in id order, from the entry of afterID
// on, skipping acknowledged receipts.
func (s *Store) ListReceiptLog(ctx context.Context, afterID int64, limit int) ([]store.LoggedReceipt, error) {
	limit = store.ListLimit(limit)
	afterEntry, _ := receiptlog.Split(max(afterID, 0))
	var out []store.LoggedReceipt
	for len(out) < limit {
		rows, err := s.rquery(ctx, `SELECT id, data FROM receipt_log_entries WHERE id >= ? ORDER BY id LIMIT 64`, afterEntry)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list receipt log: %w", wrapErr(err))
		}
		var last int64 = -1
		for rows.Next() && len(out) < limit {
			var data []byte
			if err := rows.Scan(&last, &data); err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlite: list receipt log: %w", err)
			}
			ls, err := s.logAcks.Unacked(last, data, afterID, limit-len(out))
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlite: list receipt log: %w", err)
			}
			for _, l := range ls {
				out = append(out, store.LoggedReceipt{ID: l.ID, Receipt: l.Receipt})
			}
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlite: list receipt log: %w", wrapErr(err))
		}
		rows.Close()
		if last < 0 {
			break
		}
		afterEntry = last + 1
	}
	return out, nil
}

// AckReceiptLog marks receipts acknowledged and deletes the entries that
// became fully acknowledged. Once marked, an acknowledgement stands even if
// the delete fails (the entry is deleted by a later call, or after a crash
// read back and processed again, harmlessly), and the count is returned
// without an error, since the receipts are done.
func (s *Store) AckReceiptLog(ctx context.Context, ids []int64) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	marked, done, err := s.logAcks.Mark(ids, func(entry int64) (int, bool, error) {
		var size int
		err := s.rqueryRow(ctx, `SELECT receipts FROM receipt_log_entries WHERE id = ?`, entry).Scan(&size)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("sqlite: ack receipt log: %w", wrapErr(err))
		}
		return size, true, nil
	})
	if err != nil || len(done) == 0 {
		return marked, err
	}
	err = s.write(ctx, func(w *writeTx) error {
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
	s.logAcks.Deleted(done, err)
	return marked, nil
}
