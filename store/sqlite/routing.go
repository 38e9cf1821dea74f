package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// GetOwner returns the account owning recipient.
func (s *Store) GetOwner(ctx context.Context, recipient string) (string, error) {
	var owner string
	err := s.rqueryRow(ctx, `SELECT account_id FROM customer_owners WHERE recipient = ?`, recipient).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return "", wamux.Errorf(wamux.ENotFound, "recipient has no owner")
	}
	if err != nil {
		return "", fmt.Errorf("sqlite: get owner: %w", wrapErr(err))
	}
	return owner, nil
}

// SetOwner makes accountID the owner of recipient. A move is recorded only
// when the owner changes: re-asserting the current owner is not a move.
func (s *Store) SetOwner(ctx context.Context, recipient, accountID, reason string) error {
	if recipient == "" || accountID == "" {
		return wamux.Errorf(wamux.EInvalid, "owner needs a recipient and an account_id")
	}
	now := ms(s.now())
	return s.write(ctx, func(w *writeTx) error {
		var prev string
		found, err := w.queryRow(`SELECT account_id FROM customer_owners WHERE recipient = ?`, []any{recipient}, &prev)
		if err != nil {
			return fmt.Errorf("sqlite: set owner: %w", wrapErr(err))
		}
		if found && prev == accountID {
			return nil
		}
		if _, err := w.exec(`INSERT INTO customer_owners (recipient, account_id, updated_at) VALUES (?,?,?)
			ON CONFLICT (recipient) DO UPDATE SET account_id = excluded.account_id, updated_at = excluded.updated_at`,
			recipient, accountID, now); err != nil {
			return fmt.Errorf("sqlite: set owner: %w", wrapErr(err))
		}
		if _, err := w.exec(`INSERT INTO owner_moves (recipient, from_account, to_account, reason, moved_at)
			VALUES (?,?,?,?,?)`, recipient, prev, accountID, reason, now); err != nil {
			return fmt.Errorf("sqlite: record owner move: %w", wrapErr(err))
		}
		return nil
	})
}

// ListOwnerMoves returns the ownership history of recipient, oldest first.
func (s *Store) ListOwnerMoves(ctx context.Context, recipient string) ([]store.OwnerMove, error) {
	rows, err := s.rquery(ctx, `SELECT recipient, from_account, to_account, reason, moved_at
		FROM owner_moves WHERE recipient = ? ORDER BY id`, recipient)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list owner moves: %w", wrapErr(err))
	}
	defer rows.Close()
	var out []store.OwnerMove
	for rows.Next() {
		var m store.OwnerMove
		var at int64
		if err := rows.Scan(&m.Recipient, &m.From, &m.To, &m.Reason, &at); err != nil {
			return nil, fmt.Errorf("sqlite: list owner moves: %w", err)
		}
		m.MovedAt = fromMS(at)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list owner moves: %w", wrapErr(err))
	}
	return out, nil
}

// GetSeq returns the sequence state of an account; NextSeq 1 when none is
// stored.
func (s *Store) GetSeq(ctx context.Context, accountID string) (store.SeqState, error) {
	st := store.SeqState{AccountID: accountID, NextSeq: 1}
	var updated int64
	err := s.rqueryRow(ctx, `SELECT next_seq, gaps_skipped, updated_at FROM seq_state WHERE account_id = ?`,
		accountID).Scan(&st.NextSeq, &st.GapsSkipped, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return store.SeqState{}, fmt.Errorf("sqlite: get seq: %w", wrapErr(err))
	}
	st.UpdatedAt = fromMS(updated)
	return st, nil
}

// PutSeq stores the sequence state of an account, stamping UpdatedAt.
func (s *Store) PutSeq(ctx context.Context, st store.SeqState) error {
	if err := store.ValidateSeqState(st); err != nil {
		return err
	}
	now := ms(s.now())
	return s.write(ctx, func(w *writeTx) error { return putSeqTx(w, st, now) })
}

func putSeqTx(w *writeTx, st store.SeqState, now int64) error {
	if _, err := w.exec(`INSERT INTO seq_state (account_id, next_seq, gaps_skipped, updated_at) VALUES (?,?,?,?)
		ON CONFLICT (account_id) DO UPDATE SET next_seq = excluded.next_seq,
		gaps_skipped = excluded.gaps_skipped, updated_at = excluded.updated_at`,
		st.AccountID, st.NextSeq, st.GapsSkipped, now); err != nil {
		return fmt.Errorf("sqlite: put seq: %w", wrapErr(err))
	}
	return nil
}

// ApplySeq runs the updates and the sequence state as one write request,
// which the group commit keeps atomic (its own savepoint).
func (s *Store) ApplySeq(ctx context.Context, st store.SeqState, updates []store.MessageUpdate) ([]bool, error) {
	if err := store.ValidateSeqState(st); err != nil {
		return nil, err
	}
	if err := store.ValidateUpdates(updates...); err != nil {
		return nil, err
	}
	applied := make([]bool, len(updates))
	err := s.write(ctx, func(w *writeTx) error {
		now := ms(s.now())
		for i, u := range updates {
			ok, err := updateMessageTx(w, u, now)
			if err != nil {
				return err
			}
			applied[i] = ok
		}
		return putSeqTx(w, st, now)
	})
	if err != nil {
		return nil, err
	}
	return applied, nil
}

// Settings returns every stored runtime setting.
func (s *Store) Settings(ctx context.Context) (map[string]string, error) {
	rows, err := s.rquery(ctx, `SELECT key, value FROM settings`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read settings: %w", wrapErr(err))
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("sqlite: read settings: %w", err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read settings: %w", wrapErr(err))
	}
	return out, nil
}

// PutSettings upserts the given settings in one transaction.
func (s *Store) PutSettings(ctx context.Context, kv map[string]string) error {
	if len(kv) == 0 {
		return nil
	}
	now := ms(s.now())
	return s.write(ctx, func(w *writeTx) error {
		for k, v := range kv {
			if _, err := w.exec(`INSERT INTO settings (key, value, updated_at) VALUES (?,?,?)
				ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
				k, v, now); err != nil {
				return fmt.Errorf("sqlite: put settings: %w", wrapErr(err))
			}
		}
		return nil
	})
}
