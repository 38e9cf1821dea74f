package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

const inboundCols = `account_id, wamid, type, sent_at, received_at, sender, data`

func scanInbound(sc scanner) (store.InboundMessage, error) {
	var m store.InboundMessage
	var sent, received int64
	var data string
	if err := sc.Scan(&m.AccountID, &m.WAMID, &m.Type, &sent, &received, &m.From, &data); err != nil {
		return store.InboundMessage{}, err
	}
	m.SentAt, m.ReceivedAt = fromMS(sent), fromMS(received)
	if data != "" {
		m.Data = []byte(data)
	}
	return m, nil
}

// listInboundQuery is ListInbound's query: the (account_id, sender,
// sent_at, wamid) index with a customer, (account_id, sent_at, wamid)
// without, read backwards from the cursor.
func listInboundQuery(f store.InboundFilter, after store.InboundCursor, hasAfter bool, limit int) (string, []any) {
	q := `SELECT ` + inboundCols + ` FROM inbound_messages WHERE account_id = ?`
	args := []any{f.AccountID}
	if f.From != "" {
		q += ` AND sender = ?`
		args = append(args, f.From)
	}
	if hasAfter {
		q += ` AND (sent_at, wamid) < (?, ?)`
		args = append(args, after.SentAt, after.WAMID)
	}
	return q + ` ORDER BY sent_at DESC, wamid DESC LIMIT ?`, append(args, limit)
}

// ListInbound reads a page newest first; one row more than the page says
// whether another follows.
func (s *Store) ListInbound(ctx context.Context, f store.InboundFilter) ([]store.InboundMessage, string, error) {
	if err := store.ValidateInboundFilter(f); err != nil {
		return nil, "", err
	}
	after, hasAfter, _ := store.ParseInboundCursor(f.After)
	limit := store.ListLimit(f.Limit)
	q, args := listInboundQuery(f, after, hasAfter, limit+1)
	rows, err := s.rquery(ctx, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list inbound messages: %w", wrapErr(err))
	}
	defer rows.Close()
	var out []store.InboundMessage
	for rows.Next() {
		m, err := scanInbound(rows)
		if err != nil {
			return nil, "", fmt.Errorf("sqlite: list inbound messages: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("sqlite: list inbound messages: %w", wrapErr(err))
	}
	if len(out) <= limit {
		return out, "", nil
	}
	out = out[:limit]
	last := out[limit-1]
	return out, store.InboundCursor{SentAt: ms(last.SentAt), WAMID: last.WAMID}.String(), nil
}

// GetInbound reads one message by its primary key.
func (s *Store) GetInbound(ctx context.Context, accountID, wamid string) (store.InboundMessage, error) {
	m, err := scanInbound(s.rqueryRow(ctx, `SELECT `+inboundCols+` FROM inbound_messages WHERE account_id = ? AND wamid = ?`,
		accountID, wamid))
	if errors.Is(err, sql.ErrNoRows) {
		return store.InboundMessage{}, wamux.Errorf(wamux.ENotFound, "no inbound message %q of account %q", wamid, accountID)
	}
	if err != nil {
		return store.InboundMessage{}, fmt.Errorf("sqlite: get inbound message: %w", wrapErr(err))
	}
	return m, nil
}

const (
	lastInboundQuery = `SELECT COALESCE(MAX(sent_at), 0) FROM inbound_messages WHERE account_id = ? AND sender = ?`
	lastOwnedQuery   = `SELECT COALESCE(MAX(sent_at), 0) FROM inbound_messages
		WHERE account_id = (SELECT account_id FROM customer_owners WHERE recipient = ?) AND sender = ?`
	pruneInboundSelect = `SELECT account_id, wamid FROM inbound_messages WHERE received_at < ? ORDER BY received_at LIMIT ?`
)

// LastInbound reads the end of the customer's (account_id, sender,
// sent_at) index range.
func (s *Store) LastInbound(ctx context.Context, accountID, from string) (time.Time, error) {
	if from == "" {
		return time.Time{}, nil
	}
	var last int64
	q, args := lastInboundQuery, []any{accountID, from}
	if accountID == "" {
		q, args = lastOwnedQuery, []any{from, from}
	}
	if err := s.rqueryRow(ctx, q, args...).Scan(&last); err != nil {
		return time.Time{}, fmt.Errorf("sqlite: last inbound message: %w", wrapErr(err))
	}
	return fromMS(last), nil
}

// PruneInbound deletes the oldest received first, through the
// received_at index.
func (s *Store) PruneInbound(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.write(ctx, func(w *writeTx) error {
		res, err := w.exec(`DELETE FROM inbound_messages WHERE (account_id, wamid) IN (`+pruneInboundSelect+`)`,
			ms(before), store.ListLimit(limit))
		if err != nil {
			return fmt.Errorf("sqlite: prune inbound messages: %w", wrapErr(err))
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
