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
	if err := store.ValidateReceipts(rs); err != nil {
		return nil, err
	}
	ap := s.logAcks.NewAppend(rs, ms(s.now()))
	return ap.Done(s.writeDeferred(ctx, func(w *writeTx) error {
		return ap.Insert(func(receipts int, data []byte) (int64, error) {
			res, err := w.exec(`INSERT INTO receipt_log_entries (receipts, data) VALUES (?, ?)`, receipts, data)
			if err != nil {
				return 0, fmt.Errorf("sqlite: append receipt log: %w", wrapErr(err))
			}
			return res.LastInsertId()
		})
	}))
}

// ListReceiptLog decodes entries in id order, from the entry of afterID
// on, skipping acknowledged receipts.
func (s *Store) ListReceiptLog(ctx context.Context, afterID int64, limit int) ([]store.LoggedReceipt, error) {
	ls, err := s.logAcks.List(afterID, store.ListLimit(limit), func(from int64) ([]receiptlog.Stored, error) {
		rows, err := s.rquery(ctx, `SELECT id, data FROM receipt_log_entries WHERE id >= ? ORDER BY id LIMIT ?`, from, receiptlog.PageSize)
		if err != nil {
			return nil, wrapErr(err)
		}
		defer rows.Close()
		var page []receiptlog.Stored
		for rows.Next() {
			var e receiptlog.Stored
			if err := rows.Scan(&e.ID, &e.Data); err != nil {
				return nil, err
			}
			page = append(page, e)
		}
		return page, wrapErr(rows.Err())
	}, func(e receiptlog.Stored, err error) error {
		s.opts.Logger.Error("sqlite: receipt log entry does not decode; dead-lettered", "entry", e.ID, "err", err)
		if err := s.AddDeadLetters(ctx, []store.DeadLetter{receiptlog.BadEntry(e, err)}); err != nil {
			return err
		}
		return s.writeOrdered(ctx, func(w *writeTx) error {
			_, err := w.exec(`DELETE FROM receipt_log_entries WHERE id = ?`, e.ID)
			return wrapErr(err)
		})
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: list receipt log: %w", err)
	}
	return ls, nil
}

// AckReceiptLog marks receipts acknowledged and deletes the entries that
// became fully acknowledged (receiptlog.Acks.Ack).
func (s *Store) AckReceiptLog(ctx context.Context, ids []int64) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	size := func(entry int64) (int, bool, error) {
		var n int
		err := s.rqueryRow(ctx, `SELECT receipts FROM receipt_log_entries WHERE id = ?`, entry).Scan(&n)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("sqlite: ack receipt log: %w", wrapErr(err))
		}
		return n, true, nil
	}
	return s.logAcks.Ack(ids, size, func(done []int64) error {
		return s.writeOrdered(ctx, func(w *writeTx) error {
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
	})
}
