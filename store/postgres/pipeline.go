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
	for i := range rs {
		if rs[i].MessageID == "" || rs[i].AccountID == "" || rs[i].Type == "" {
			return nil, wamux.Errorf(wamux.EInvalid, "receipt %d needs message_id, account_id and type", i)
		}
	}
	now := ms(s.now())
	chunks := receiptlog.Chunks(rs)
	datas := make([][]byte, len(chunks))
	for k, c := range chunks {
		datas[k] = receiptlog.Encode(c, now)
	}
	ids := make([]int64, 0, len(rs))
	var registered []int64
	err := s.inTx(ctx, "append receipt log", func(tx pgx.Tx) error {
		// A retried attempt's entries were never committed.
		s.logAcks.Forget(registered)
		ids, registered = ids[:0], registered[:0]
		for k, data := range datas {
			var entry int64
			if err := tx.QueryRow(ctx, `INSERT INTO receipt_log_entries (receipts, data) VALUES ($1, $2) RETURNING id`,
				len(chunks[k]), data).Scan(&entry); err != nil {
				return err
			}
			for i := range chunks[k] {
				ids = append(ids, receiptlog.ID(entry, i))
			}
			// Before the commit: see receiptlog.Acks.Register.
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
	if s.closed.Load() {
		return nil, errClosed
	}
	limit = store.ListLimit(limit)
	afterEntry, _ := receiptlog.Split(max(afterID, 0))
	var out []store.LoggedReceipt
	for len(out) < limit {
		rows, err := s.pool.Query(ctx, `SELECT id, data FROM receipt_log_entries WHERE id >= $1 ORDER BY id LIMIT 64`, afterEntry)
		if err != nil {
			return nil, fmt.Errorf("postgres: list receipt log: %w", wrapErr(err))
		}
		var last int64 = -1
		for rows.Next() && len(out) < limit {
			var data []byte
			if err := rows.Scan(&last, &data); err != nil {
				rows.Close()
				return nil, fmt.Errorf("postgres: list receipt log: %w", err)
			}
			ls, err := s.logAcks.Unacked(last, data, afterID, limit-len(out))
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("postgres: list receipt log: %w", err)
			}
			for _, l := range ls {
				out = append(out, store.LoggedReceipt{ID: l.ID, Receipt: l.Receipt})
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("postgres: list receipt log: %w", wrapErr(err))
		}
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
	if s.closed.Load() {
		return 0, errClosed
	}
	marked, done, err := s.logAcks.Mark(ids, func(entry int64) (int, bool, error) {
		var size int
		err := s.pool.QueryRow(ctx, `SELECT receipts FROM receipt_log_entries WHERE id = $1`, entry).Scan(&size)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, fmt.Errorf("postgres: ack receipt log: %w", wrapErr(err))
		}
		return size, true, nil
	})
	if err != nil || len(done) == 0 {
		return marked, err
	}
	_, err = s.pool.Exec(ctx, `DELETE FROM receipt_log_entries WHERE id = ANY($1::bigint[])`, done)
	s.logAcks.Deleted(done, err)
	return marked, nil
}

// FindMessages looks messages up by wamid or msg_id in one query.
func (s *Store) FindMessages(ctx context.Context, wamids, msgIDs []string) ([]wamux.Message, error) {
	if len(wamids) == 0 && len(msgIDs) == 0 {
		return nil, nil
	}
	if s.closed.Load() {
		return nil, errClosed
	}
	if wamids == nil {
		wamids = []string{}
	}
	if msgIDs == nil {
		msgIDs = []string{}
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
	now := ms(s.now())
	for i, m := range msgs {
		if m.AccountID == "" || m.WAMID == "" {
			return 0, wamux.Errorf(wamux.EInvalid, "inbound message %d needs account_id and wamid", i)
		}
		acc[i], wamid[i], typ[i], sent[i], received[i] = m.AccountID, m.WAMID, m.Type, ms(m.SentAt), ms(m.ReceivedAt)
		if received[i] == 0 {
			received[i] = now
		}
	}
	var added int
	err := s.inTx(ctx, "add inbound messages", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO inbound_messages (account_id, wamid, type, sent_at, received_at)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[])
			ON CONFLICT DO NOTHING`, acc, wamid, typ, sent, received)
		added = int(tag.RowsAffected())
		return err
	})
	return added, err
}
