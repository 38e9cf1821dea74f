package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// The WHERE clauses of the partial indexes of migration 0160, character
// for character: SQLite uses a partial index only for a query whose
// clause contains the index's terms.
const (
	queuedPlainSQL = `status = 'queued' AND client_seq IS NULL`
	queuedSeqSQL   = `status = 'queued' AND client_seq IS NOT NULL`
	queuedSQL      = `status = 'queued'`
)

// ListQueue implements store.MessageStore. Each query names its index:
// without statistics the planner prefers the unique (account_id,
// client_seq) index, which holds every message ever sent. The recipients
// left out are bound as one JSON array, so the statement text stays the
// same whatever their number.
func (s *Store) ListQueue(ctx context.Context, f store.QueueFilter) ([]wamux.Message, error) {
	q, args, err := listQueueQuery(f)
	if err != nil {
		return nil, err
	}
	rows, err := s.rquery(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list queue: %w", wrapErr(err))
	}
	defer rows.Close()
	var out []wamux.Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list queue: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list queue: %w", wrapErr(err))
	}
	return out, nil
}

func listQueueQuery(f store.QueueFilter) (string, []any, error) {
	limit := store.ListLimit(f.Limit)
	q := `SELECT ` + messageCols + ` FROM messages `
	args := []any{f.AccountID}
	if f.Recipient != "" {
		q += `INDEXED BY messages_queued_to WHERE account_id = ? AND ` + queuedSQL +
			` AND recipient = ? ORDER BY created_at, rowid LIMIT ?`
		return q, append(args, f.Recipient, limit), nil
	}
	var order string
	if f.Sequenced {
		q += `INDEXED BY messages_queued_seq WHERE account_id = ? AND ` + queuedSeqSQL
		order = ` ORDER BY client_seq LIMIT ?`
	} else {
		q += `INDEXED BY messages_queued WHERE account_id = ? AND ` + queuedPlainSQL
		order = ` ORDER BY priority, created_at, rowid LIMIT ?`
	}
	if len(f.ExceptRecipients) > 0 {
		except, err := json.Marshal(f.ExceptRecipients)
		if err != nil {
			return "", nil, fmt.Errorf("sqlite: list queue: %w", err)
		}
		q += ` AND recipient NOT IN (SELECT value FROM json_each(?))`
		args = append(args, string(except))
	}
	return q + order, append(args, limit), nil
}

// CountQueued implements store.MessageStore from the two partial indexes
// alone.
func (s *Store) CountQueued(ctx context.Context, accountID string) ([3]int, error) {
	var out [3]int
	for _, clause := range []string{queuedPlainSQL, queuedSeqSQL} {
		rows, err := s.rquery(ctx, `SELECT priority, count(*) FROM messages WHERE account_id = ? AND `+clause+
			` GROUP BY priority`, accountID)
		if err != nil {
			return out, fmt.Errorf("sqlite: count queued: %w", wrapErr(err))
		}
		for rows.Next() {
			var p, n int
			if err := rows.Scan(&p, &n); err != nil {
				rows.Close()
				return out, fmt.Errorf("sqlite: count queued: %w", err)
			}
			if p >= 0 && p < len(out) {
				out[p] += n
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return out, fmt.Errorf("sqlite: count queued: %w", wrapErr(err))
		}
	}
	return out, nil
}
