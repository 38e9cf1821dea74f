package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// GetStates returns the merged status of the given provider messages.
func (s *Store) GetStates(ctx context.Context, keys []store.StateKey) (map[store.StateKey]store.MessageState, error) {
	out := make(map[store.StateKey]store.MessageState, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	if s.closed.Load() {
		return nil, errClosed
	}
	acc, msg := make([]string, 0, len(keys)), make([]string, 0, len(keys))
	for _, k := range keys {
		if storable(k.AccountID) && storable(k.MessageID) {
			acc, msg = append(acc, k.AccountID), append(msg, k.MessageID)
		}
	}
	if len(acc) == 0 {
		return out, nil
	}
	if len(acc) == 1 {
		// The send path asks for one key per accepted message: a plain
		// primary-key read costs the server less than the join below.
		return out, s.getState(ctx, acc[0], msg[0], out)
	}
	rows, err := s.pool.Query(ctx, `SELECT s.account_id, s.message_id, s.type, s.event_time, s.error_code, s.updated_at
		FROM unnest($1::text[], $2::text[]) AS k(a, m)
		JOIN message_states s ON s.account_id = k.a AND s.message_id = k.m`, acc, msg)
	if err != nil {
		return nil, fmt.Errorf("postgres: get states: %w", wrapErr(err))
	}
	var st store.MessageState
	var typ string
	var event, code, updated int64
	if _, err := pgx.ForEachRow(rows, []any{&st.AccountID, &st.MessageID, &typ, &event, &code, &updated}, func() error {
		st.Type, st.EventTime, st.ErrorCode, st.UpdatedAt = wamux.ReceiptType(typ), fromMS(event), int(code), fromMS(updated)
		out[st.StateKey] = st
		return nil
	}); err != nil {
		return nil, fmt.Errorf("postgres: get states: %w", wrapErr(err))
	}
	return out, nil
}

// getState reads one merged status into out, if there is one.
func (s *Store) getState(ctx context.Context, account, msgID string, out map[store.StateKey]store.MessageState) error {
	st := store.MessageState{StateKey: store.StateKey{AccountID: account, MessageID: msgID}}
	var typ string
	var event, code, updated int64
	err := s.pool.QueryRow(ctx, `SELECT type, event_time, error_code, updated_at FROM message_states
		WHERE account_id = $1 AND message_id = $2`, account, msgID).Scan(&typ, &event, &code, &updated)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("postgres: get states: %w", wrapErr(err))
	}
	st.Type, st.EventTime, st.ErrorCode, st.UpdatedAt = wamux.ReceiptType(typ), fromMS(event), int(code), fromMS(updated)
	out[st.StateKey] = st
	return nil
}

// PutStates inserts or replaces merged statuses; a zero UpdatedAt is
// stamped with the store's clock. For a key given twice the last one wins
// (the statement may touch each row only once, so repeats are folded
// first, and keys are sorted so concurrent callers lock rows in one order).
func (s *Store) PutStates(ctx context.Context, states []store.MessageState) error {
	if len(states) == 0 {
		return nil
	}
	last := make(map[store.StateKey]int, len(states))
	for i := range states {
		if states[i].AccountID == "" || states[i].MessageID == "" {
			return wamux.Errorf(wamux.EInvalid, "state %d needs account_id and message_id", i)
		}
		last[states[i].StateKey] = i
	}
	idx := make([]int, 0, len(last))
	for _, i := range last {
		idx = append(idx, i)
	}
	slices.SortFunc(idx, func(a, b int) int {
		ka, kb := states[a].StateKey, states[b].StateKey
		return cmp.Or(cmp.Compare(ka.AccountID, kb.AccountID), cmp.Compare(ka.MessageID, kb.MessageID))
	})
	n := len(idx)
	acc, msg, typ := make([]string, n), make([]string, n), make([]string, n)
	event, code, updated := make([]int64, n), make([]int64, n), make([]int64, n)
	now := ms(s.now())
	for j, i := range idx {
		st := &states[i]
		acc[j], msg[j], typ[j] = st.AccountID, st.MessageID, string(st.Type)
		event[j], code[j], updated[j] = ms(st.EventTime), int64(st.ErrorCode), ms(st.UpdatedAt)
		if updated[j] == 0 {
			updated[j] = now
		}
	}
	return s.inTx(ctx, "put states", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO message_states (account_id, message_id, type, event_time, error_code, updated_at)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[])
			ON CONFLICT (account_id, message_id) DO UPDATE SET
				type = excluded.type, event_time = excluded.event_time,
				error_code = excluded.error_code, updated_at = excluded.updated_at`,
			acc, msg, typ, event, code, updated)
		return err
	})
}
