package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

const inboundCols = `account_id, wamid, type, sent_at, received_at, sender, data`

func scanInbound(row pgx.Row) (store.InboundMessage, error) {
	var m store.InboundMessage
	var sent, received int64
	var data string
	if err := row.Scan(&m.AccountID, &m.WAMID, &m.Type, &sent, &received, &m.From, &data); err != nil {
		return store.InboundMessage{}, err
	}
	m.SentAt, m.ReceivedAt = fromMS(sent), fromMS(received)
	if data != "" {
		m.Data = []byte(data)
	}
	return m, nil
}

// ListInbound reads a page newest first through the (account_id, sender,
// sent_at, wamid) or (account_id, sent_at, wamid) index; one row more
// than the page says whether another follows. Keys PostgreSQL's text
// cannot hold name no stored message.
func (s *Store) ListInbound(ctx context.Context, f store.InboundFilter) ([]store.InboundMessage, string, error) {
	if err := store.ValidateInboundFilter(f); err != nil {
		return nil, "", err
	}
	after, hasAfter, _ := store.ParseInboundCursor(f.After)
	if !storable(f.AccountID) || !storable(f.From) || !storable(after.WAMID) {
		return nil, "", nil
	}
	limit := store.ListLimit(f.Limit)
	q := `SELECT ` + inboundCols + ` FROM inbound_messages WHERE account_id = $1`
	args := []any{f.AccountID}
	if f.From != "" {
		args = append(args, f.From)
		q += fmt.Sprintf(` AND sender = $%d`, len(args))
	}
	if hasAfter {
		args = append(args, after.SentAt, after.WAMID)
		q += fmt.Sprintf(` AND (sent_at, wamid) < ($%d, $%d)`, len(args)-1, len(args))
	}
	args = append(args, limit+1)
	q += fmt.Sprintf(` ORDER BY sent_at DESC, wamid DESC LIMIT $%d`, len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("postgres: list inbound messages: %w", wrapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.InboundMessage, error) { return scanInbound(row) })
	if err != nil {
		return nil, "", fmt.Errorf("postgres: list inbound messages: %w", wrapErr(err))
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
	notFound := wamux.Errorf(wamux.ENotFound, "no inbound message %q of account %q", wamid, accountID)
	if !storable(accountID) || !storable(wamid) {
		return store.InboundMessage{}, notFound
	}
	m, err := scanInbound(s.pool.QueryRow(ctx, `SELECT `+inboundCols+` FROM inbound_messages WHERE account_id = $1 AND wamid = $2`,
		accountID, wamid))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.InboundMessage{}, notFound
	}
	if err != nil {
		return store.InboundMessage{}, fmt.Errorf("postgres: get inbound message: %w", wrapErr(err))
	}
	return m, nil
}

// LastInbound reads the end of the customer's (account_id, sender,
// sent_at) index range.
func (s *Store) LastInbound(ctx context.Context, accountID, from string) (time.Time, error) {
	if from == "" || !storable(accountID) || !storable(from) {
		return time.Time{}, nil
	}
	q, args := `SELECT COALESCE(MAX(sent_at), 0) FROM inbound_messages WHERE account_id = $1 AND sender = $2`, []any{accountID, from}
	if accountID == "" {
		q, args = `SELECT COALESCE(MAX(sent_at), 0) FROM inbound_messages
			WHERE account_id = (SELECT account_id FROM customer_owners WHERE recipient = $1) AND sender = $1`, []any{from}
	}
	var last int64
	if err := s.pool.QueryRow(ctx, q, args...).Scan(&last); err != nil {
		return time.Time{}, fmt.Errorf("postgres: last inbound message: %w", wrapErr(err))
	}
	return fromMS(last), nil
}

// PruneInbound deletes the oldest received first, through the
// received_at index.
func (s *Store) PruneInbound(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM inbound_messages WHERE (account_id, wamid) IN
		(SELECT account_id, wamid FROM inbound_messages WHERE received_at < $1 ORDER BY received_at LIMIT $2)`,
		ms(before), store.ListLimit(limit))
	if err != nil {
		return 0, fmt.Errorf("postgres: prune inbound messages: %w", wrapErr(err))
	}
	return int(tag.RowsAffected()), nil
}
