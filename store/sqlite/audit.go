package sqlite

import (
	"context"
	"fmt"

	"github.com/wamux/wamux/store"
)

// AddLateReceipts records receipts kept out of the merge; a zero
// RecordedAt is stamped with the store's clock.
func (s *Store) AddLateReceipts(ctx context.Context, rs []store.LateReceipt) error {
	if len(rs) == 0 {
		return nil
	}
	now := ms(s.now())
	return s.write(ctx, func(w *writeTx) error {
		for i := range rs {
			r := &rs[i]
			recorded := ms(r.RecordedAt)
			if recorded == 0 {
				recorded = now
			}
			if _, err := w.exec(`INSERT INTO late_receipts (`+receiptCols+`, reason, recorded_at)
				VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`,
				r.MessageID, r.AccountID, string(r.Type), ms(r.EventTime), r.CallbackData, r.Recipient,
				r.ErrorCode, r.ErrorTitle, r.Source, ms(r.ReceivedAt), r.Reason, recorded); err != nil {
				return fmt.Errorf("sqlite: add late receipts: %w", wrapErr(err))
			}
		}
		return nil
	})
}

// ListLateReceipts returns up to limit audited receipts, newest first.
func (s *Store) ListLateReceipts(ctx context.Context, limit int) ([]store.LateReceipt, error) {
	limit = store.ListLimit(limit)
	rows, err := s.rquery(ctx, `SELECT `+receiptCols+`, reason, recorded_at FROM late_receipts
		ORDER BY recorded_at DESC, id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list late receipts: %w", wrapErr(err))
	}
	defer rows.Close()
	var out []store.LateReceipt
	for rows.Next() {
		var l store.LateReceipt
		var recorded int64
		if err := scanReceipt(lateScanner{rows, &l.Reason, &recorded}, &l.Receipt); err != nil {
			return nil, fmt.Errorf("sqlite: list late receipts: %w", err)
		}
		l.RecordedAt = fromMS(recorded)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list late receipts: %w", wrapErr(err))
	}
	return out, nil
}

// lateScanner appends the audit columns to a receipt scan.
type lateScanner struct {
	sc     scanner
	reason *string
	at     *int64
}

func (l lateScanner) Scan(dest ...any) error {
	return l.sc.Scan(append(dest, l.reason, l.at)...)
}

// AddDeadLetters keeps input that failed processing for good; a zero
// RecordedAt is stamped with the store's clock.
func (s *Store) AddDeadLetters(ctx context.Context, ds []store.DeadLetter) error {
	if len(ds) == 0 {
		return nil
	}
	now := ms(s.now())
	return s.write(ctx, func(w *writeTx) error {
		for i := range ds {
			d := &ds[i]
			recorded := ms(d.RecordedAt)
			if recorded == 0 {
				recorded = now
			}
			if _, err := w.exec(`INSERT INTO dead_letters (source, account_id, reason, payload, recorded_at)
				VALUES (?,?,?,?,?)`, d.Source, d.AccountID, d.Reason, d.Payload, recorded); err != nil {
				return fmt.Errorf("sqlite: add dead letters: %w", wrapErr(err))
			}
		}
		return nil
	})
}

// ListDeadLetters returns up to limit dead letters, newest first.
func (s *Store) ListDeadLetters(ctx context.Context, limit int) ([]store.DeadLetter, error) {
	limit = store.ListLimit(limit)
	rows, err := s.rquery(ctx, `SELECT id, source, account_id, reason, payload, recorded_at
		FROM dead_letters ORDER BY recorded_at DESC, id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list dead letters: %w", wrapErr(err))
	}
	defer rows.Close()
	var out []store.DeadLetter
	for rows.Next() {
		var d store.DeadLetter
		var recorded int64
		if err := rows.Scan(&d.ID, &d.Source, &d.AccountID, &d.Reason, &d.Payload, &recorded); err != nil {
			return nil, fmt.Errorf("sqlite: list dead letters: %w", err)
		}
		d.RecordedAt = fromMS(recorded)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list dead letters: %w", wrapErr(err))
	}
	return out, nil
}
