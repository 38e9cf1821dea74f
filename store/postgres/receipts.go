package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

const receiptCols = `message_id, account_id, receipt_type, event_time, callback_data, recipient,
	error_code, error_title, source, received_at`

const insertReceiptsSQL = `INSERT INTO receipts (` + receiptCols + `)
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[],
		$7::bigint[], $8::text[], $9::text[], $10::bigint[])
	ON CONFLICT DO NOTHING RETURNING message_id, account_id, receipt_type`

func compareKeys(a, b store.ReceiptKey) int {
	return cmp.Or(cmp.Compare(a.MessageID, b.MessageID), cmp.Compare(a.AccountID, b.AccountID), cmp.Compare(a.Type, b.Type))
}

// InsertReceipts inserts the distinct receipts of rs in one statement; the
// keys RETURNING reports are the new ones. Rows go in key order, so two
// overlapping batches lock index entries in the same order and cannot
// deadlock.
func (s *Store) InsertReceipts(ctx context.Context, rs []wamux.Receipt) ([]bool, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	if err := store.ValidateReceipts(rs); err != nil {
		return nil, err
	}
	first := make(map[store.ReceiptKey]int, len(rs))
	uniq := make([]int, 0, len(rs))
	for i := range rs {
		r := &rs[i]
		k := store.ReceiptKey{MessageID: r.MessageID, AccountID: r.AccountID, Type: r.Type}
		if _, ok := first[k]; !ok {
			first[k] = i
			uniq = append(uniq, i)
		}
	}
	slices.SortFunc(uniq, func(a, b int) int {
		return compareKeys(store.ReceiptKey{MessageID: rs[a].MessageID, AccountID: rs[a].AccountID, Type: rs[a].Type},
			store.ReceiptKey{MessageID: rs[b].MessageID, AccountID: rs[b].AccountID, Type: rs[b].Type})
	})
	n := len(uniq)
	msg, acc, typ, cb, rcpt, title, src := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	event, code, received := make([]int64, n), make([]int64, n), make([]int64, n)
	now := ms(s.now())
	for j, i := range uniq {
		r := &rs[i]
		msg[j], acc[j], typ[j], cb[j], rcpt[j] = r.MessageID, r.AccountID, string(r.Type), r.CallbackData, r.Recipient
		title[j], src[j], event[j], code[j], received[j] = r.ErrorTitle, r.Source, ms(r.EventTime), int64(r.ErrorCode), ms(r.ReceivedAt)
		if received[j] == 0 {
			received[j] = now
		}
	}
	out := make([]bool, len(rs))
	err := s.inTx(ctx, "insert receipts", func(tx pgx.Tx) error {
		clear(out)
		rows, err := tx.Query(ctx, insertReceiptsSQL, msg, acc, typ, event, cb, rcpt, code, title, src, received)
		if err != nil {
			return err
		}
		var k store.ReceiptKey
		var t string
		_, err = pgx.ForEachRow(rows, []any{&k.MessageID, &k.AccountID, &t}, func() error {
			k.Type = wamux.ReceiptType(t)
			out[first[k]] = true
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// HasReceipts looks all keys up in one query.
func (s *Store) HasReceipts(ctx context.Context, keys []store.ReceiptKey) ([]bool, error) {
	return s.hasReceipts(ctx, keys, hasReceiptsSQL)
}

// HasCallbackReceipts looks all keys up in one query, as HasReceipts, and
// reports only the rows that carry callback data.
func (s *Store) HasCallbackReceipts(ctx context.Context, keys []store.ReceiptKey) ([]bool, error) {
	return s.hasReceipts(ctx, keys, hasReceiptsSQL+` AND r.callback_data <> ''`)
}

// hasReceiptsSQL selects the ordinal of each key of ($1, $2, $3) that has
// a receipt row r.
const hasReceiptsSQL = `SELECT k.i FROM unnest($1::text[], $2::text[], $3::text[])
			WITH ORDINALITY AS k(m, a, t, i)
		JOIN receipts r ON r.message_id = k.m AND r.account_id = k.a AND r.receipt_type = k.t`

// hasReceipts marks the keys q selects.
func (s *Store) hasReceipts(ctx context.Context, keys []store.ReceiptKey, q string) ([]bool, error) {
	out := make([]bool, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	if s.closed.Load() {
		return nil, errClosed
	}
	var msg, acc, typ []string
	var pos []int // pos[j] is the index in keys of row j
	for i, k := range keys {
		if storable(k.MessageID) && storable(k.AccountID) && storable(string(k.Type)) {
			msg, acc, typ, pos = append(msg, k.MessageID), append(acc, k.AccountID), append(typ, string(k.Type)), append(pos, i)
		}
	}
	if len(pos) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, q, msg, acc, typ)
	if err != nil {
		return nil, fmt.Errorf("postgres: has receipts: %w", wrapErr(err))
	}
	var i int64
	if _, err := pgx.ForEachRow(rows, []any{&i}, func() error {
		out[pos[i-1]] = true
		return nil
	}); err != nil {
		return nil, fmt.Errorf("postgres: has receipts: %w", wrapErr(err))
	}
	return out, nil
}

func scanReceipt(row pgx.Row, r *wamux.Receipt, extra ...any) error {
	var typ string
	var event, received, code int64
	dest := append([]any{&r.MessageID, &r.AccountID, &typ, &event, &r.CallbackData, &r.Recipient,
		&code, &r.ErrorTitle, &r.Source, &received}, extra...)
	if err := row.Scan(dest...); err != nil {
		return err
	}
	r.Type, r.EventTime, r.ReceivedAt, r.ErrorCode = wamux.ReceiptType(typ), fromMS(event), fromMS(received), int(code)
	return nil
}

// ListReceipts returns the receipts of one provider message by event time.
func (s *Store) ListReceipts(ctx context.Context, accountID, messageID string) ([]wamux.Receipt, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	if !storable(accountID) || !storable(messageID) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+receiptCols+` FROM receipts
		WHERE message_id = $1 AND account_id = $2 ORDER BY event_time, receipt_type`, messageID, accountID)
	if err != nil {
		return nil, fmt.Errorf("postgres: list receipts: %w", wrapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (wamux.Receipt, error) {
		var r wamux.Receipt
		err := scanReceipt(row, &r)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list receipts: %w", wrapErr(err))
	}
	return out, nil
}
