package postgres

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// ListQueue implements store.MessageStore, served by the partial indexes
// of migration 0130.
func (s *Store) ListQueue(ctx context.Context, f store.QueueFilter) ([]wamux.Message, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	// Values PostgreSQL text cannot hold match no message (storable).
	if !storable(f.AccountID) || !storable(f.Recipient) {
		return nil, nil
	}
	limit := store.ListLimit(f.Limit)
	q := `SELECT ` + messageCols + ` FROM messages WHERE account_id = $1 AND status = 'queued'`
	args := []any{f.AccountID}
	switch {
	case f.Recipient != "":
		args = append(args, f.Recipient, limit)
		q += ` AND left(recipient, 200) = left($2, 200) AND recipient = $2 ORDER BY created_at, stored_order LIMIT $3`
	default:
		order := ` ORDER BY priority, created_at, stored_order`
		if f.Sequenced {
			q += ` AND client_seq IS NOT NULL`
			order = ` ORDER BY client_seq`
		} else {
			q += ` AND client_seq IS NULL`
		}
		if except := storableOnly(f.ExceptRecipients); len(except) > 0 {
			args = append(args, except)
			q += ` AND recipient <> ALL($` + strconv.Itoa(len(args)) + `::text[])`
		}
		args = append(args, limit)
		q += order + ` LIMIT $` + strconv.Itoa(len(args))
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list queue: %w", wrapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (wamux.Message, error) { return scanMessage(r) })
	if err != nil {
		return nil, fmt.Errorf("postgres: list queue: %w", wrapErr(err))
	}
	return out, nil
}

// CountQueued implements store.MessageStore.
func (s *Store) CountQueued(ctx context.Context, accountID string) ([3]int, error) {
	var out [3]int
	if s.closed.Load() {
		return out, errClosed
	}
	if !storable(accountID) {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT priority, count(*) FROM messages
		WHERE account_id = $1 AND status = 'queued' AND client_seq IS NULL GROUP BY priority
		UNION ALL
		SELECT priority, count(*) FROM messages
		WHERE account_id = $1 AND status = 'queued' AND client_seq IS NOT NULL GROUP BY priority`, accountID)
	if err != nil {
		return out, fmt.Errorf("postgres: count queued: %w", wrapErr(err))
	}
	type row struct{ p, n int64 }
	counts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.p, &x.n)
		return x, err
	})
	if err != nil {
		return out, fmt.Errorf("postgres: count queued: %w", wrapErr(err))
	}
	for _, c := range counts {
		if c.p >= 0 && int(c.p) < len(out) {
			out[c.p] += int(c.n)
		}
	}
	return out, nil
}
