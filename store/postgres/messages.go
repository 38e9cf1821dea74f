package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

const messageCols = `msg_id, biz_type, account_id, client_seq, recipient, priority, type, payload,
	content_hash, status, wamid, attempts, last_error, created_at, updated_at`

func scanMessage(row pgx.Row) (wamux.Message, error) {
	var m wamux.Message
	var seq pgtype.Int8
	var wamid pgtype.Text
	var status string
	var priority, attempts, created, updated int64
	if err := row.Scan(&m.ID, &m.BizType, &m.AccountID, &seq, &m.To, &priority, &m.Type, &m.Payload,
		&m.ContentHash, &status, &wamid, &attempts, &m.LastError, &created, &updated); err != nil {
		return wamux.Message{}, err
	}
	m.ClientSeq, m.WAMID, m.Status = seq.Int64, wamid.String, wamux.Status(status)
	m.Priority, m.Attempts = wamux.Priority(priority), int(attempts)
	m.CreatedAt, m.UpdatedAt = fromMS(created), fromMS(updated)
	return m, nil
}

// messageArrays holds a batch column by column for unnest.
type messageArrays struct {
	id, biz, account, to, typ, hash, status, lastErr []string
	seq                                              []pgtype.Int8
	wamid                                            []pgtype.Text
	priority, attempts                               []int64
	payload                                          [][]byte
}

func newMessageArrays(msgs []wamux.Message) *messageArrays {
	n := len(msgs)
	a := &messageArrays{
		id: make([]string, n), biz: make([]string, n), account: make([]string, n), to: make([]string, n),
		typ: make([]string, n), hash: make([]string, n), status: make([]string, n), lastErr: make([]string, n),
		seq: make([]pgtype.Int8, n), wamid: make([]pgtype.Text, n), priority: make([]int64, n),
		attempts: make([]int64, n), payload: make([][]byte, n),
	}
	for i, m := range msgs {
		a.id[i], a.biz[i], a.account[i], a.to[i], a.typ[i] = m.ID, m.BizType, m.AccountID, m.To, m.Type
		a.hash[i], a.status[i], a.lastErr[i] = m.ContentHash, string(m.Status), m.LastError
		a.seq[i] = pgtype.Int8{Int64: m.ClientSeq, Valid: m.ClientSeq != 0}
		a.wamid[i] = pgtype.Text{String: m.WAMID, Valid: m.WAMID != ""}
		a.priority[i], a.attempts[i], a.payload[i] = int64(m.Priority), int64(m.Attempts), m.Payload
	}
	return a
}

// insertMessagesSQL keeps input order (WITH ORDINALITY) so that, of two
// new messages competing for one (account_id, client_seq), the first wins.
const insertMessagesSQL = `INSERT INTO messages (` + messageCols + `)
	SELECT id, biz, account, seq, rcpt, prio, typ, payload, hash, status, wamid, attempts, last_error, $14::bigint, $14::bigint
	FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::bigint[], $7::text[],
		$8::bytea[], $9::text[], $10::text[], $11::text[], $12::bigint[], $13::text[])
		WITH ORDINALITY AS u(id, biz, account, seq, rcpt, prio, typ, payload, hash, status, wamid, attempts, last_error, ord)
	ORDER BY ord
	ON CONFLICT DO NOTHING RETURNING msg_id, account_id, client_seq, content_hash, wamid`

// InsertMessages inserts the batch in one statement with ON CONFLICT DO
// NOTHING; RETURNING names the new rows, and the rest are looked up in the
// same transaction to tell a duplicate from a conflict.
func (s *Store) InsertMessages(ctx context.Context, msgs []wamux.Message) ([]store.InsertResult, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	for i := range msgs {
		if msgs[i].ID == "" {
			return nil, wamux.Errorf(wamux.EInvalid, "message %d has no msg_id", i)
		}
	}
	arr := newMessageArrays(msgs)
	var results []store.InsertResult
	err := s.inTx(ctx, "insert messages", func(tx pgx.Tx) error {
		results = make([]store.InsertResult, len(msgs))
		rows, err := tx.Query(ctx, insertMessagesSQL, arr.id, arr.biz, arr.account, arr.seq, arr.to, arr.priority,
			arr.typ, arr.payload, arr.hash, arr.status, arr.wamid, arr.attempts, arr.lastErr, ms(s.now()))
		if err != nil {
			return err
		}
		// The stored rows' identities: of several messages with one msg_id,
		// the stored one is the first nothing blocked (store.StoredCopy).
		inserted := map[string]wamux.Message{}
		var row wamux.Message
		var seq pgtype.Int8
		var wamid pgtype.Text
		if _, err := pgx.ForEachRow(rows, []any{&row.ID, &row.AccountID, &seq, &row.ContentHash, &wamid}, func() error {
			row.ClientSeq, row.WAMID = seq.Int64, wamid.String
			inserted[row.ID] = row
			return nil
		}); err != nil {
			return err
		}
		for i := range msgs {
			m := &msgs[i]
			if stored, ok := inserted[m.ID]; ok && store.StoredCopy(*m, stored) {
				delete(inserted, m.ID) // a repeat later in msgs is not new
				results[i] = store.InsertResult{Outcome: store.Inserted}
				continue
			}
			if results[i], err = explainNotInserted(ctx, tx, m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// explainNotInserted finds the stored message that blocked m: the same
// msg_id (duplicate or conflict by content), or another msg_id holding the
// same (account_id, client_seq) or wamid (conflict).
func explainNotInserted(ctx context.Context, tx pgx.Tx, m *wamux.Message) (store.InsertResult, error) {
	lookups := []struct {
		where string
		args  []any
		skip  bool
	}{
		{"msg_id = $1", []any{m.ID}, false},
		{"account_id = $1 AND client_seq = $2", []any{m.AccountID, m.ClientSeq}, m.ClientSeq == 0},
		{"wamid = $1", []any{m.WAMID}, m.WAMID == ""},
	}
	for i, l := range lookups {
		if l.skip {
			continue
		}
		existing, err := scanMessage(tx.QueryRow(ctx, `SELECT `+messageCols+` FROM messages WHERE `+l.where, l.args...))
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return store.InsertResult{}, err
		}
		return store.Blocked(*m, existing, i == 0), nil
	}
	return store.InsertResult{}, fmt.Errorf("message %q ignored without a conflicting row", m.ID)
}

// GetMessage returns one message by msg_id.
func (s *Store) GetMessage(ctx context.Context, msgID string) (wamux.Message, error) {
	return s.getMessage(ctx, "msg_id", msgID)
}

// GetMessageByWAMID returns the message the provider accepted under wamid.
func (s *Store) GetMessageByWAMID(ctx context.Context, wamid string) (wamux.Message, error) {
	return s.getMessage(ctx, "wamid", wamid)
}

func (s *Store) getMessage(ctx context.Context, col, v string) (wamux.Message, error) {
	if s.closed.Load() {
		return wamux.Message{}, errClosed
	}
	if !storable(v) {
		return wamux.Message{}, wamux.Errorf(wamux.ENotFound, "message %q not found", v)
	}
	m, err := scanMessage(s.pool.QueryRow(ctx, `SELECT `+messageCols+` FROM messages WHERE `+col+` = $1`, v))
	if errors.Is(err, pgx.ErrNoRows) {
		return wamux.Message{}, wamux.Errorf(wamux.ENotFound, "message %q not found", v)
	}
	if err != nil {
		return wamux.Message{}, fmt.Errorf("postgres: get message: %w", wrapErr(err))
	}
	return m, nil
}

// UpdateMessage applies one lifecycle transition, guarded by u.From when
// given; an empty u.Status keeps the current status. The precondition is
// part of the UPDATE, so concurrent callers cannot both pass it.
func (s *Store) UpdateMessage(ctx context.Context, u store.MessageUpdate) (bool, error) {
	if err := store.ValidateUpdates(u); err != nil {
		return false, err
	}
	if s.closed.Load() {
		return false, errClosed
	}
	if !storable(u.MsgID) {
		return false, wamux.Errorf(wamux.ENotFound, "message %q not found", u.MsgID)
	}
	rows, err := s.updates.do(ctx, u, ms(s.now()))
	return updateOutcome(ctx, s.pool, u, rows, err)
}

// querier is what a pool and a transaction have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// updateMessageSQL is a message update without its fence (fencedSQL).
const updateMessageSQL = `UPDATE messages SET
		status     = COALESCE(NULLIF($1, ''), status),
		wamid      = COALESCE(NULLIF($2, ''), wamid),
		attempts   = attempts + $3,
		last_error = COALESCE($4, last_error),
		account_id = COALESCE(NULLIF($5, ''), account_id),
		updated_at = $6
	WHERE msg_id = $7 AND (cardinality($8::text[]) = 0 OR status = ANY($8::text[]))`

// updateStatement is the statement and arguments of one message update.
func updateStatement(u store.MessageUpdate, now int64) (string, []any) {
	from := make([]string, len(u.From))
	for i, st := range u.From {
		from[i] = string(st)
	}
	sql, args := updateMessageSQL, []any{string(u.Status), u.WAMID, int64(u.AttemptsDelta), u.LastError, u.AccountID, now, u.MsgID, from}
	if u.Fence != nil {
		sql, args = updateMessageSQL+fencedSQL, append(args, u.Fence.Partition, u.Fence.Epoch)
	}
	return sql, args
}

// updateOutcome turns what an update statement did (rows changed, err)
// into UpdateMessage's answer: an error for a unique violation, a stale
// fence or a missing message, else whether the update applied.
func updateOutcome(ctx context.Context, q querier, u store.MessageUpdate, rows int64, err error) (bool, error) {
	if isUnique(err) {
		return false, wamux.Errorf(wamux.EConflict, "wamid or client_seq of message %q already used by another message", u.MsgID)
	}
	if err != nil {
		return false, fmt.Errorf("postgres: update message: %w", wrapErr(err))
	}
	if rows == 1 {
		return true, nil
	}
	if u.Fence != nil {
		if err := checkFence(ctx, q, u.MsgID, *u.Fence); err != nil {
			return false, err
		}
	}
	var one int
	err = q.QueryRow(ctx, `SELECT 1 FROM messages WHERE msg_id = $1`, u.MsgID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, wamux.Errorf(wamux.ENotFound, "message %q not found", u.MsgID)
	}
	if err != nil {
		return false, fmt.Errorf("postgres: update message: %w", wrapErr(err))
	}
	return false, nil
}

// ListMessages returns matching messages oldest first; those of one insert
// (one created_at) by stored_order, which the insert assigns in input order.
func (s *Store) ListMessages(ctx context.Context, f store.MessageFilter) ([]wamux.Message, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	limit := store.ListLimit(f.Limit)
	// Values PostgreSQL text cannot hold match no message (storable).
	if !storable(f.AccountID) {
		return nil, nil
	}
	var where []string
	var args []any
	if f.AccountID != "" {
		args = append(args, f.AccountID)
		where = append(where, "account_id = $"+strconv.Itoa(len(args)))
	}
	if len(f.Statuses) > 0 {
		st := make([]string, len(f.Statuses))
		for i, v := range f.Statuses {
			st[i] = string(v)
		}
		if st = storableOnly(st); len(st) == 0 {
			return nil, nil
		}
		args = append(args, st)
		where = append(where, "status = ANY($"+strconv.Itoa(len(args))+"::text[])")
	}
	q := `SELECT ` + messageCols + ` FROM messages`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, limit)
	q += ` ORDER BY created_at, stored_order LIMIT $` + strconv.Itoa(len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: list messages: %w", wrapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (wamux.Message, error) { return scanMessage(r) })
	if err != nil {
		return nil, fmt.Errorf("postgres: list messages: %w", wrapErr(err))
	}
	return out, nil
}
