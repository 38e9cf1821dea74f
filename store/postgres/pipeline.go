package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/receiptlog"
)

// The receipt log (store.PipelineStore) is stored as entries, one row per
// append (package receiptlog; migration 0060 moved the per-receipt rows).
// Entry ids come from the sequence, so they follow the order appends got
// them, not commit order; readers do not use them as a cursor of commits.

// AppendReceiptLog stores the receipts as one entry (or several, past
// receiptlog.MaxEntry) in one transaction.
func (s *Store) AppendReceiptLog(ctx context.Context, rs []wamux.Receipt) ([]int64, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	if err := store.ValidateReceipts(rs); err != nil {
		return nil, err
	}
	ap := s.logAcks.NewAppend(rs, ms(s.now()))
	return ap.Done(s.inTx(ctx, "append receipt log", func(tx pgx.Tx) error {
		return ap.Insert(func(receipts int, data []byte) (entry int64, err error) {
			err = tx.QueryRow(ctx, `INSERT INTO receipt_log_entries (receipts, data) VALUES ($1, $2) RETURNING id`,
				receipts, data).Scan(&entry)
			return entry, err
		})
	}))
}

// ListReceiptLog decodes entries in id order, from the entry of afterID
// on, skipping acknowledged receipts.
func (s *Store) ListReceiptLog(ctx context.Context, afterID int64, limit int) ([]store.LoggedReceipt, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	ls, err := s.logAcks.List(afterID, store.ListLimit(limit), func(from int64) ([]receiptlog.Stored, error) {
		rows, err := s.pool.Query(ctx, `SELECT id, data FROM receipt_log_entries WHERE id >= $1 ORDER BY id LIMIT $2`,
			from, receiptlog.PageSize)
		if err != nil {
			return nil, wrapErr(err)
		}
		return pgx.CollectRows(rows, pgx.RowToStructByPos[receiptlog.Stored])
	}, func(e receiptlog.Stored, err error) error {
		// Kept in the dead letters with its bytes and the reason.
		if err := s.AddDeadLetters(ctx, []store.DeadLetter{receiptlog.BadEntry(e, err)}); err != nil {
			return err
		}
		_, err = s.pool.Exec(ctx, `DELETE FROM receipt_log_entries WHERE id = $1`, e.ID)
		return wrapErr(err)
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list receipt log: %w", wrapErr(err))
	}
	return ls, nil
}

// AckReceiptLog marks receipts acknowledged and deletes the entries that
// became fully acknowledged (receiptlog.Acks.Ack).
func (s *Store) AckReceiptLog(ctx context.Context, ids []int64) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	if s.closed.Load() {
		return 0, errClosed
	}
	size := func(entry int64) (int, bool, error) {
		var n int
		err := s.pool.QueryRow(ctx, `SELECT receipts FROM receipt_log_entries WHERE id = $1`, entry).Scan(&n)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("postgres: ack receipt log: %w", wrapErr(err))
		}
		return n, true, nil
	}
	return s.logAcks.Ack(ids, size, func(done []int64) error {
		_, err := s.pool.Exec(ctx, `DELETE FROM receipt_log_entries WHERE id = ANY($1::bigint[])`, done)
		return err
	})
}

// FindMessages looks messages up by wamid or msg_id in one query.
func (s *Store) FindMessages(ctx context.Context, wamids, msgIDs []string) ([]wamux.Message, error) {
	if len(wamids) == 0 && len(msgIDs) == 0 {
		return nil, nil
	}
	if s.closed.Load() {
		return nil, errClosed
	}
	wamids, msgIDs = storableOnly(wamids), storableOnly(msgIDs)
	if len(wamids) == 0 && len(msgIDs) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+messageCols+` FROM messages
		WHERE wamid = ANY($1::text[]) OR msg_id = ANY($2::text[])`, wamids, msgIDs)
	if err != nil {
		return nil, fmt.Errorf("postgres: find messages: %w", wrapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (wamux.Message, error) { return scanMessage(row) })
	if err != nil {
		return nil, fmt.Errorf("postgres: find messages: %w", wrapErr(err))
	}
	return out, nil
}

// AddInboundMessages inserts with ON CONFLICT DO NOTHING in one statement.
func (s *Store) AddInboundMessages(ctx context.Context, msgs []store.InboundMessage) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	n := len(msgs)
	acc, wamid, typ := make([]string, n), make([]string, n), make([]string, n)
	sent, received := make([]int64, n), make([]int64, n)
	from, data := make([]string, n), make([]string, n)
	now := ms(s.now())
	for i, m := range msgs {
		if m.AccountID == "" || m.WAMID == "" {
			return 0, wamux.Errorf(wamux.EInvalid, "inbound message %d needs account_id and wamid", i)
		}
		acc[i], wamid[i], typ[i], sent[i], received[i] = m.AccountID, m.WAMID, m.Type, ms(m.SentAt), ms(m.ReceivedAt)
		from[i], data[i] = storableText(m.From), storableText(string(m.Data))
		if received[i] == 0 {
			received[i] = now
		}
	}
	var added int
	err := s.inTx(ctx, "add inbound messages", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO inbound_messages (account_id, wamid, type, sent_at, received_at, sender, data)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::text[])
			ON CONFLICT DO NOTHING`, acc, wamid, typ, sent, received, from, data)
		added = int(tag.RowsAffected())
		return err
	})
	return added, err
}
