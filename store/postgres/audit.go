package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux/store"
)

// AddLateReceipts records receipts kept out of the merge; a zero
// RecordedAt is stamped with the store's clock.
func (s *Store) AddLateReceipts(ctx context.Context, rs []store.LateReceipt) error {
	if len(rs) == 0 {
		return nil
	}
	now := ms(s.now())
	return s.inTx(ctx, "add late receipts", func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for i := range rs {
			r := &rs[i]
			recorded := ms(r.RecordedAt)
			if recorded == 0 {
				recorded = now
			}
			b.Queue(`INSERT INTO late_receipts (`+receiptCols+`, reason, recorded_at)
				VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)`,
				r.MessageID, r.AccountID, string(r.Type), ms(r.EventTime), r.CallbackData, r.Recipient,
				int64(r.ErrorCode), r.ErrorTitle, r.Source, ms(r.ReceivedAt), r.Reason, recorded)
		}
		return tx.SendBatch(ctx, b).Close()
	})
}

// ListLateReceipts returns up to limit audited receipts, newest first.
func (s *Store) ListLateReceipts(ctx context.Context, limit int) ([]store.LateReceipt, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	limit = store.ListLimit(limit)
	rows, err := s.pool.Query(ctx, `SELECT `+receiptCols+`, reason, recorded_at FROM late_receipts
		ORDER BY recorded_at DESC, id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: list late receipts: %w", wrapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.LateReceipt, error) {
		var l store.LateReceipt
		var recorded int64
		err := scanReceipt(row, &l.Receipt, &l.Reason, &recorded)
		l.RecordedAt = fromMS(recorded)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list late receipts: %w", wrapErr(err))
	}
	return out, nil
}

// AddDeadLetters keeps input that failed processing for good; a zero
// RecordedAt is stamped with the store's clock.
func (s *Store) AddDeadLetters(ctx context.Context, ds []store.DeadLetter) error {
	if len(ds) == 0 {
		return nil
	}
	now := ms(s.now())
	return s.inTx(ctx, "add dead letters", func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for i := range ds {
			d := &ds[i]
			recorded := ms(d.RecordedAt)
			if recorded == 0 {
				recorded = now
			}
			b.Queue(`INSERT INTO dead_letters (source, account_id, reason, payload, recorded_at) VALUES ($1,$2,$3,$4,$5)`,
				d.Source, d.AccountID, d.Reason, d.Payload, recorded)
		}
		return tx.SendBatch(ctx, b).Close()
	})
}

// ListDeadLetters returns up to limit dead letters, newest first.
func (s *Store) ListDeadLetters(ctx context.Context, limit int) ([]store.DeadLetter, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	limit = store.ListLimit(limit)
	rows, err := s.pool.Query(ctx, `SELECT id, source, account_id, reason, payload, recorded_at
		FROM dead_letters ORDER BY recorded_at DESC, id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: list dead letters: %w", wrapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.DeadLetter, error) {
		var d store.DeadLetter
		var recorded int64
		err := row.Scan(&d.ID, &d.Source, &d.AccountID, &d.Reason, &d.Payload, &recorded)
		d.RecordedAt = fromMS(recorded)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list dead letters: %w", wrapErr(err))
	}
	return out, nil
}
