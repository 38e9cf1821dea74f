package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// GetOwner returns the account owning recipient.
func (s *Store) GetOwner(ctx context.Context, recipient string) (string, error) {
	if s.closed.Load() {
		return "", errClosed
	}
	if !storable(recipient) {
		return "", wamux.Errorf(wamux.ENotFound, "recipient has no owner")
	}
	var owner string
	err := s.pool.QueryRow(ctx, `SELECT account_id FROM customer_owners WHERE recipient = $1`, recipient).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", wamux.Errorf(wamux.ENotFound, "recipient has no owner")
	}
	if err != nil {
		return "", fmt.Errorf("postgres: get owner: %w", wrapErr(err))
	}
	return owner, nil
}

// SetOwner makes accountID the owner of recipient. A move is recorded only
// when the owner changes. The first assignment is an INSERT … ON CONFLICT
// DO NOTHING, and a change locks the row, so concurrent callers serialise
// and every move names its true predecessor.
func (s *Store) SetOwner(ctx context.Context, recipient, accountID, reason string) error {
	if recipient == "" || accountID == "" {
		return wamux.Errorf(wamux.EInvalid, "owner needs a recipient and an account_id")
	}
	now := ms(s.now())
	return s.inTx(ctx, "set owner", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO customer_owners (recipient, account_id, updated_at) VALUES ($1, $2, $3)
			ON CONFLICT (recipient) DO NOTHING`, recipient, accountID, now)
		if err != nil {
			return err
		}
		prev := ""
		if tag.RowsAffected() == 0 {
			if err := tx.QueryRow(ctx, `SELECT account_id FROM customer_owners WHERE recipient = $1 FOR UPDATE`,
				recipient).Scan(&prev); err != nil {
				return err
			}
			if prev == accountID {
				return nil
			}
			if _, err := tx.Exec(ctx, `UPDATE customer_owners SET account_id = $2, updated_at = $3 WHERE recipient = $1`,
				recipient, accountID, now); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `INSERT INTO owner_moves (recipient, from_account, to_account, reason, moved_at)
			VALUES ($1, $2, $3, $4, $5)`, recipient, prev, accountID, reason, now)
		return err
	})
}

// ListOwnerMoves returns the ownership history of recipient, oldest first.
func (s *Store) ListOwnerMoves(ctx context.Context, recipient string) ([]store.OwnerMove, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	if !storable(recipient) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT recipient, from_account, to_account, reason, moved_at
		FROM owner_moves WHERE recipient = $1 ORDER BY id`, recipient)
	if err != nil {
		return nil, fmt.Errorf("postgres: list owner moves: %w", wrapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.OwnerMove, error) {
		var m store.OwnerMove
		var at int64
		err := row.Scan(&m.Recipient, &m.From, &m.To, &m.Reason, &at)
		m.MovedAt = fromMS(at)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list owner moves: %w", wrapErr(err))
	}
	return out, nil
}

// GetSeq returns the sequence state of an account; NextSeq 1 when none is
// stored.
func (s *Store) GetSeq(ctx context.Context, accountID string) (store.SeqState, error) {
	if s.closed.Load() {
		return store.SeqState{}, errClosed
	}
	st := store.SeqState{AccountID: accountID, NextSeq: 1}
	if !storable(accountID) {
		return st, nil
	}
	var updated int64
	err := s.pool.QueryRow(ctx, `SELECT next_seq, gaps_skipped, updated_at FROM seq_state WHERE account_id = $1`,
		accountID).Scan(&st.NextSeq, &st.GapsSkipped, &updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return store.SeqState{}, fmt.Errorf("postgres: get seq: %w", wrapErr(err))
	}
	st.UpdatedAt = fromMS(updated)
	return st, nil
}

// PutSeq stores the sequence state of an account, stamping UpdatedAt.
func (s *Store) PutSeq(ctx context.Context, st store.SeqState) error {
	if err := store.ValidateSeqState(st); err != nil {
		return err
	}
	if s.closed.Load() {
		return errClosed
	}
	return putSeq(ctx, s.pool, st, ms(s.now()))
}

func putSeq(ctx context.Context, q querier, st store.SeqState, now int64) error {
	if _, err := q.Exec(ctx, `INSERT INTO seq_state (account_id, next_seq, gaps_skipped, updated_at)
		VALUES ($1, $2, $3, $4)
		ON CONFLICT (account_id) DO UPDATE SET next_seq = excluded.next_seq,
			gaps_skipped = excluded.gaps_skipped, updated_at = excluded.updated_at`,
		st.AccountID, st.NextSeq, st.GapsSkipped, now); err != nil {
		return fmt.Errorf("postgres: put seq: %w", wrapErr(err))
	}
	return nil
}

// ApplySeq runs the updates and the sequence state in one transaction.
func (s *Store) ApplySeq(ctx context.Context, st store.SeqState, updates []store.MessageUpdate) ([]bool, error) {
	if err := store.ValidateSeqState(st); err != nil {
		return nil, err
	}
	if err := store.ValidateUpdates(updates...); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, errClosed
	}
	applied := make([]bool, len(updates))
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now := ms(s.now())
		rows, err := pipelineUpdates(ctx, tx, updates, now)
		if err != nil {
			return err
		}
		for i, u := range updates {
			// Why an update changed nothing is asked in the transaction:
			// a stale fence undoes the whole call.
			if applied[i], err = updateOutcome(ctx, tx, u, rows[i], nil); err != nil {
				return err
			}
		}
		return putSeq(ctx, tx, st, now)
	})
	if err != nil {
		if wamux.ErrorCode(err) != wamux.EInternal {
			return nil, err
		}
		return nil, fmt.Errorf("postgres: apply seq: %w", wrapErr(err))
	}
	return applied, nil
}

// Settings returns every stored runtime setting.
func (s *Store) Settings(ctx context.Context) (map[string]string, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	rows, err := s.pool.Query(ctx, `SELECT key, value FROM settings`)
	if err != nil {
		return nil, fmt.Errorf("postgres: read settings: %w", wrapErr(err))
	}
	out := map[string]string{}
	var k, v string
	if _, err := pgx.ForEachRow(rows, []any{&k, &v}, func() error {
		out[k] = v
		return nil
	}); err != nil {
		return nil, fmt.Errorf("postgres: read settings: %w", wrapErr(err))
	}
	return out, nil
}

// PutSettings upserts the given settings in one transaction, in key order
// so concurrent callers cannot deadlock.
func (s *Store) PutSettings(ctx context.Context, kv map[string]string) error {
	if len(kv) == 0 {
		return nil
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	vals := make([]string, len(keys))
	for i, k := range keys {
		vals[i] = kv[k]
	}
	now := ms(s.now())
	return s.inTx(ctx, "put settings", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO settings (key, value, updated_at)
			SELECT k, v, $3 FROM unnest($1::text[], $2::text[]) AS u(k, v)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
			keys, vals, now)
		return err
	})
}

// pipelineUpdates sends the updates in one round trip and returns the
// rows each changed; the first failure is returned as updateOutcome maps
// it.
func pipelineUpdates(ctx context.Context, tx pgx.Tx, updates []store.MessageUpdate, now int64) ([]int64, error) {
	rows := make([]int64, len(updates))
	if len(updates) == 0 {
		return rows, nil
	}
	b := &pgx.Batch{}
	for _, u := range updates {
		sql, args := updateStatement(u, now)
		b.Queue(sql, args...)
	}
	br := tx.SendBatch(ctx, b)
	for i, u := range updates {
		tag, err := br.Exec()
		if err != nil {
			br.Close()
			_, err = updateOutcome(ctx, tx, u, 0, err)
			return nil, err
		}
		rows[i] = tag.RowsAffected()
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("postgres: update messages: %w", wrapErr(err))
	}
	return rows, nil
}
