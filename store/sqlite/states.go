package sqlite

import (
	"context"
	"fmt"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// stateColCount: a state row of message_receipts binds its message's
// number and its entry, the empty string, too, so that multiInsert's
// uniform rows serve.
const stateColCount = 6

const maxStateRows = 1024

// GetStates returns the merged status of the given provider messages.
func (s *Store) GetStates(ctx context.Context, keys []store.StateKey) (map[store.StateKey]store.MessageState, error) {
	out := make(map[store.StateKey]store.MessageState, len(keys))
	for start := 0; start < len(keys); start += maxKeyRows {
		chunk := keys[start:min(start+maxKeyRows, len(keys))]
		// Padded with copies of the last key so few statement texts exist;
		// a key found twice lands on the same map entry.
		n := padRows(len(chunk))
		args := make([]any, 0, n*2)
		for i := 0; i < n; i++ {
			k := &chunk[min(i, len(chunk)-1)]
			args = append(args, k.AccountID, k.MessageID)
		}
		// The dispatcher asks for one key after every accepted send; a
		// plain key lookup skips the VALUES table and the join.
		q := `SELECT mk.account_id, mk.message_id, s.type, s.event_time, s.error_code, s.stamp
			FROM message_keys mk JOIN message_receipts s ON s.seq = mk.seq AND s.entry = ''
			WHERE mk.account_id = ? AND mk.message_id = ?`
		if n > 1 {
			q = multiInsert("WITH k(a, m) AS (VALUES ", 2, n,
				`) SELECT k.a, k.m, s.type, s.event_time, s.error_code, s.stamp
				FROM k JOIN message_keys mk ON mk.account_id = k.a AND mk.message_id = k.m
				JOIN message_receipts s ON s.seq = mk.seq AND s.entry = ''`)
		}
		rows, err := s.rquery(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("sqlite: get states: %w", wrapErr(err))
		}
		for rows.Next() {
			var st store.MessageState
			var typ string
			var event, updated int64
			if err := rows.Scan(&st.AccountID, &st.MessageID, &typ, &event, &st.ErrorCode, &updated); err != nil {
				rows.Close()
				return nil, fmt.Errorf("sqlite: get states: %w", err)
			}
			st.Type, st.EventTime, st.UpdatedAt = wamux.ReceiptType(typ), fromMS(event), fromMS(updated)
			out[st.StateKey] = st
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlite: get states: %w", wrapErr(err))
		}
		rows.Close()
	}
	return out, nil
}

// PutStates inserts or replaces merged statuses; a zero UpdatedAt is
// stamped with the store's clock. For a key given twice the last one wins.
func (s *Store) PutStates(ctx context.Context, states []store.MessageState) error {
	if len(states) == 0 {
		return nil
	}
	for i := range states {
		if states[i].AccountID == "" || states[i].MessageID == "" {
			return wamux.Errorf(wamux.EInvalid, "state %d needs account_id and message_id", i)
		}
	}
	now := ms(s.now())
	keys := make([]store.StateKey, len(states))
	for i := range states {
		keys[i] = states[i].StateKey
	}
	return s.write(ctx, func(w *writeTx) error {
		seqs, err := w.messageSeqs(keys)
		if err != nil {
			return err
		}
		args := make([]any, 0, min(padRows(len(states)), maxStateRows)*stateColCount)
		for start := 0; start < len(states); start += maxStateRows {
			chunk := states[start:min(start+maxStateRows, len(states))]
			rows := padRows(len(chunk))
			args = args[:0]
			for i := 0; i < rows; i++ {
				j := min(i, len(chunk)-1)
				st := &chunk[j]
				updated := ms(st.UpdatedAt)
				if updated == 0 {
					updated = now
				}
				args = append(args, seqs[start+j], "", string(st.Type), ms(st.EventTime), st.ErrorCode, updated)
			}
			q := multiInsert(`INSERT INTO message_receipts (seq, entry, type, event_time, error_code, stamp)
				VALUES `, stateColCount, rows, ` ON CONFLICT (seq, entry) DO UPDATE SET
				type = excluded.type, event_time = excluded.event_time,
				error_code = excluded.error_code, stamp = excluded.stamp`)
			if _, err := w.exec(q, args...); err != nil {
				return fmt.Errorf("sqlite: put states: %w", wrapErr(err))
			}
		}
		return nil
	})
}
