package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// AppendReceiptLog takes ids from the sequence first and inserts with them,
// so each receipt's id is known without relying on the order of RETURNING.
func (s *Store) AppendReceiptLog(ctx context.Context, rs []wamux.Receipt) ([]int64, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	n := len(rs)
	msg, acc, typ, cb, rcpt, title, src := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	event, code, received := make([]int64, n), make([]int64, n), make([]int64, n)
	now := ms(s.now())
	for i := range rs {
		r := &rs[i]
		if r.MessageID == "" || r.AccountID == "" || r.Type == "" {
			return nil, wamux.Errorf(wamux.EInvalid, "receipt %d needs message_id, account_id and type", i)
		}
		msg[i], acc[i], typ[i], cb[i], rcpt[i] = r.MessageID, r.AccountID, string(r.Type), r.CallbackData, r.Recipient
		title[i], src[i], event[i], code[i], received[i] = r.ErrorTitle, r.Source, ms(r.EventTime), int64(r.ErrorCode), ms(r.ReceivedAt)
		if received[i] == 0 {
			received[i] = now
		}
	}
	var ids []int64
	err := s.inTx(ctx, "append receipt log", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT nextval(pg_get_serial_sequence('receipt_log', 'id')) FROM generate_series(1, $1)`, n)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		if len(ids) != n {
			return fmt.Errorf("sequence gave %d ids for %d receipts", len(ids), n)
		}
		_, err = tx.Exec(ctx, `INSERT INTO receipt_log (id, `+receiptCols+`)
			SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[],
				$8::bigint[], $9::text[], $10::text[], $11::bigint[])`,
			ids, msg, acc, typ, event, cb, rcpt, code, title, src, received)
		return err
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// ListReceiptLog reads the log in id order.
func (s *Store) ListReceiptLog(ctx context.Context, afterID int64, limit int) ([]store.LoggedReceipt, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	limit = store.ListLimit(limit)
	rows, err := s.pool.Query(ctx, `SELECT `+receiptCols+`, id FROM receipt_log WHERE id > $1 ORDER BY id LIMIT $2`, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: list receipt log: %w", wrapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.LoggedReceipt, error) {
		var l store.LoggedReceipt
		err := scanReceipt(row, &l.Receipt, &l.ID)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list receipt log: %w", wrapErr(err))
	}
	return out, nil
}

// AckReceiptLog deletes the ids in one statement.
func (s *Store) AckReceiptLog(ctx context.Context, ids []int64) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	if s.closed.Load() {
		return 0, errClosed
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM receipt_log WHERE id = ANY($1::bigint[])`, ids)
	if err != nil {
		return 0, fmt.Errorf("postgres: ack receipt log: %w", wrapErr(err))
	}
	return int(tag.RowsAffected()), nil
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
