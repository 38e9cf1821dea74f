package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

const messageCols = `msg_id, biz_type, account_id, client_seq, recipient, priority, type, payload,
	content_hash, status, wamid, attempts, last_error, created_at, updated_at`

const messageColCount = 15

// maxMessageRows keeps one multi-row INSERT well under SQLite's limit of
// 32766 bound variables.
const maxMessageRows = 1024

func scanMessage(sc scanner) (wamux.Message, error) {
	var m wamux.Message
	var seq sql.NullInt64
	var wamid sql.NullString
	var status string
	var created, updated int64
	if err := sc.Scan(&m.ID, &m.BizType, &m.AccountID, &seq, &m.To, &m.Priority, &m.Type, &m.Payload,
		&m.ContentHash, &status, &wamid, &m.Attempts, &m.LastError, &created, &updated); err != nil {
		return wamux.Message{}, err
	}
	m.ClientSeq, m.WAMID, m.Status = seq.Int64, wamid.String, wamux.Status(status)
	m.CreatedAt, m.UpdatedAt = fromMS(created), fromMS(updated)
	return m, nil
}

// InsertMessages inserts with ON CONFLICT DO NOTHING and learns from
// RETURNING which rows were new; the others are looked up inside the same
// transaction to tell a duplicate from a conflict.
func (s *Store) InsertMessages(ctx context.Context, msgs []wamux.Message) ([]store.InsertResult, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	for i := range msgs {
		if msgs[i].ID == "" {
			return nil, wamux.Errorf(wamux.EInvalid, "message %d has no msg_id", i)
		}
	}
	var results []store.InsertResult
	err := s.write(ctx, func(w *writeTx) error {
		results = make([]store.InsertResult, len(msgs))
		now := ms(s.now())
		// The stored rows' identities: of several messages with one msg_id,
		// the stored one is the first nothing blocked (store.StoredCopy).
		inserted := make(map[string]wamux.Message, len(msgs))
		for start := 0; start < len(msgs); start += maxMessageRows {
			chunk := msgs[start:min(start+maxMessageRows, len(msgs))]
			if err := insertMessageChunk(w, chunk, now, inserted); err != nil {
				return err
			}
		}
		for i := range msgs {
			m := &msgs[i]
			if stored, ok := inserted[m.ID]; ok && store.StoredCopy(*m, stored) {
				delete(inserted, m.ID) // a repeat later in msgs is not new
				results[i] = store.InsertResult{Outcome: store.Inserted}
				continue
			}
			r, err := explainNotInserted(w, m)
			if err != nil {
				return err
			}
			results[i] = r
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

func insertMessageChunk(w *writeTx, chunk []wamux.Message, now int64, inserted map[string]wamux.Message) error {
	rows := padRows(len(chunk))
	args := make([]any, 0, rows*messageColCount)
	for i := 0; i < rows; i++ {
		// Padding repeats the last message; its copies conflict with it and
		// are ignored, so few distinct statement sizes get cached.
		m := &chunk[min(i, len(chunk)-1)]
		var seq, wamid any
		if m.ClientSeq != 0 {
			seq = m.ClientSeq
		}
		if m.WAMID != "" {
			wamid = m.WAMID
		}
		args = append(args, m.ID, m.BizType, m.AccountID, seq, m.To, int(m.Priority), m.Type, m.Payload,
			m.ContentHash, string(m.Status), wamid, m.Attempts, m.LastError, now, now)
	}
	q := multiInsert("INSERT INTO messages ("+messageCols+") VALUES ", messageColCount, rows,
		" ON CONFLICT DO NOTHING RETURNING msg_id, account_id, client_seq, content_hash, wamid")
	res, err := w.query(q, args...)
	if err != nil {
		return fmt.Errorf("sqlite: insert messages: %w", wrapErr(err))
	}
	defer res.Close()
	for res.Next() {
		var m wamux.Message
		var seq sql.NullInt64
		var wamid sql.NullString
		if err := res.Scan(&m.ID, &m.AccountID, &seq, &m.ContentHash, &wamid); err != nil {
			return fmt.Errorf("sqlite: insert messages: %w", err)
		}
		m.ClientSeq, m.WAMID = seq.Int64, wamid.String
		inserted[m.ID] = m
	}
	if err := res.Close(); err != nil {
		return fmt.Errorf("sqlite: insert messages: %w", wrapErr(err))
	}
	return nil
}

// explainNotInserted finds the stored message that blocked m: the same
// msg_id (duplicate or conflict by content), or another msg_id holding the
// same (account_id, client_seq) or wamid (conflict).
func explainNotInserted(w *writeTx, m *wamux.Message) (store.InsertResult, error) {
	lookups := []struct {
		where string
		arg   []any
		skip  bool
	}{
		{"msg_id = ?", []any{m.ID}, false},
		{"account_id = ? AND client_seq = ?", []any{m.AccountID, m.ClientSeq}, m.ClientSeq == 0},
		{"wamid = ?", []any{m.WAMID}, m.WAMID == ""},
	}
	for i, l := range lookups {
		if l.skip {
			continue
		}
		rows, err := w.query(`SELECT `+messageCols+` FROM messages WHERE `+l.where, l.arg...)
		if err != nil {
			return store.InsertResult{}, fmt.Errorf("sqlite: look up message: %w", wrapErr(err))
		}
		found := rows.Next()
		var existing wamux.Message
		if found {
			existing, err = scanMessage(rows)
		}
		cerr := rows.Close()
		if err = errors.Join(err, cerr, rows.Err()); err != nil {
			return store.InsertResult{}, fmt.Errorf("sqlite: look up message: %w", wrapErr(err))
		}
		if !found {
			continue
		}
		return store.Blocked(*m, existing, i == 0), nil
	}
	return store.InsertResult{}, fmt.Errorf("sqlite: insert message %q: ignored without a conflicting row", m.ID)
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
	m, err := scanMessage(s.rqueryRow(ctx, `SELECT `+messageCols+` FROM messages WHERE `+col+` = ?`, v))
	if errors.Is(err, sql.ErrNoRows) {
		return wamux.Message{}, wamux.Errorf(wamux.ENotFound, "message %q not found", v)
	}
	if err != nil {
		return wamux.Message{}, fmt.Errorf("sqlite: get message: %w", wrapErr(err))
	}
	return m, nil
}

// UpdateMessage applies one lifecycle transition, guarded by u.From when
// given. An empty u.Status keeps the current status.
func (s *Store) UpdateMessage(ctx context.Context, u store.MessageUpdate) (bool, error) {
	if err := store.ValidateUpdates(u); err != nil {
		return false, err
	}
	var applied bool
	err := s.writeOneStatement(ctx, func(w *writeTx) error {
		var err error
		applied, err = updateMessageTx(w, u, ms(s.now()))
		return err
	})
	if err != nil {
		return false, err
	}
	return applied, nil
}

// updateMessageTx is UpdateMessage inside a write transaction.
//
// The SET list names only the columns the update changes: SQLite
// maintains every index on a column that is assigned, even to its own
// value, so a status change written as "wamid = COALESCE(?, wamid),
// account_id = COALESCE(?, account_id)" also deleted and re-inserted the
// message's wamid and (account, client_seq) entries, several times per
// message. Per length of the precondition at most 2^6 statement texts
// exist (five optional columns, the fence); the writer caches them.
func updateMessageTx(w *writeTx, u store.MessageUpdate, now int64) (bool, error) {
	var q strings.Builder
	args := make([]any, 0, 9+len(u.From))
	q.WriteString(`UPDATE messages SET updated_at = ?`)
	args = append(args, now)
	if u.Status != "" {
		q.WriteString(`, status = ?`)
		args = append(args, string(u.Status))
	}
	if u.WAMID != "" {
		q.WriteString(`, wamid = ?`)
		args = append(args, u.WAMID)
	}
	if u.AttemptsDelta != 0 {
		q.WriteString(`, attempts = attempts + ?`)
		args = append(args, u.AttemptsDelta)
	}
	if u.LastError != nil {
		q.WriteString(`, last_error = ?`)
		args = append(args, *u.LastError)
	}
	if u.AccountID != "" {
		q.WriteString(`, account_id = ?`)
		args = append(args, u.AccountID)
	}
	q.WriteString(` WHERE msg_id = ?`)
	args = append(args, u.MsgID)
	// The precondition is spelled as ORed comparisons: SQLite evaluates
	// "status IN (?, ?, ?)" with three or more values by building a
	// temporary b-tree of the list on every execution, which cost more
	// than the update itself.
	for i, st := range u.From {
		if i == 0 {
			q.WriteString(` AND (status = ?`)
		} else {
			q.WriteString(` OR status = ?`)
		}
		args = append(args, string(st))
	}
	if len(u.From) > 0 {
		q.WriteString(`)`)
	}
	if u.Fence != nil {
		q.WriteString(fencedSQL)
		args = append(args, u.Fence.Partition, u.Fence.Epoch)
	}
	res, err := w.exec(q.String(), args...)
	if isUnique(err) {
		return false, wamux.Errorf(wamux.EConflict, "wamid or client_seq of message %q already used by another message", u.MsgID)
	}
	if err != nil {
		return false, fmt.Errorf("sqlite: update message: %w", wrapErr(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlite: update message: %w", err)
	}
	if n == 1 {
		return true, nil
	}
	if u.Fence != nil {
		if err := checkFence(w, u.MsgID, *u.Fence); err != nil {
			return false, err
		}
	}
	var one int
	found, err := w.queryRow(`SELECT 1 FROM messages WHERE msg_id = ?`, []any{u.MsgID}, &one)
	if err != nil {
		return false, fmt.Errorf("sqlite: update message: %w", wrapErr(err))
	}
	if !found {
		return false, wamux.Errorf(wamux.ENotFound, "message %q not found", u.MsgID)
	}
	return false, nil
}

// activeStatusesSQL is the WHERE clause of the partial index
// messages_active (migration 0060), character for character.
const activeStatusesSQL = "status IN ('waiting_seq', 'queued', 'sending', 'unknown', 'held')"

// activeStatuses are the statuses of activeStatusesSQL.
var activeStatuses = []wamux.Status{wamux.StatusWaitingSeq, wamux.StatusQueued, wamux.StatusSending,
	wamux.StatusUnknown, wamux.StatusHeld}

// ListMessages returns matching messages oldest first; those of one insert
// (one created_at) by rowid, which the multi-row insert assigns in input
// order (the table has no INTEGER PRIMARY KEY: only a VACUUM, which this
// store never runs, could renumber rowids). When every asked
// status is an active one the query repeats the partial index's clause, so
// the index serves it; other statuses are listed by a scan (no caller on a
// hot path asks for them).
func (s *Store) ListMessages(ctx context.Context, f store.MessageFilter) ([]wamux.Message, error) {
	q, args := listMessagesQuery(f)
	rows, err := s.rquery(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list messages: %w", wrapErr(err))
	}
	defer rows.Close()
	var out []wamux.Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list messages: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list messages: %w", wrapErr(err))
	}
	return out, nil
}

// listMessagesQuery builds ListMessages' query.
func listMessagesQuery(f store.MessageFilter) (string, []any) {
	limit := store.ListLimit(f.Limit)
	var where []string
	var args []any
	if f.AccountID != "" {
		where = append(where, "account_id = ?")
		args = append(args, f.AccountID)
	}
	if len(f.Statuses) > 0 {
		where = append(where, "status IN ("+placeholders(len(f.Statuses))+")")
		active := true
		for _, st := range f.Statuses {
			args = append(args, string(st))
			active = active && slices.Contains(activeStatuses, st)
		}
		if active {
			where = append(where, activeStatusesSQL)
		}
	}
	q := `SELECT ` + messageCols + ` FROM messages`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY created_at, rowid LIMIT ?`
	return q, append(args, limit)
}
