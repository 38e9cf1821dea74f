package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// stateColCount: a state row of message_receipts binds its message's
// number and its entry, the empty string, too, so that multiInsert's
// uniform rows serve.
const stateColCount = 6

const maxStateRows = 1024

// GetStates returns the merged status of the given provider messages:
// from the state cache when it knows, else from message_receipts, where
// a message's state is its state row or, without one, derived from its
// applied receipt rows (statecache.go). Messages whose numbers the cache
// holds or the ledger's tail knows are read by number; the rest through
// message_key_index, and the numbers found there join the cache.
func (s *Store) GetStates(ctx context.Context, keys []store.StateKey) (map[store.StateKey]store.MessageState, error) {
	out := make(map[store.StateKey]store.MessageState, len(keys))
	seq := make([]int64, len(keys))
	known, unknown := s.lookupNumbers(keys, seq)
	// States the writer committed lately are answered from memory, and so
	// is the absence of one for messages it numbered lately.
	uncached := known[:0]
	for _, j := range known {
		c, ok := s.states.get(seq[j])
		if !ok || c.typ == 0 {
			if !c.complete {
				uncached = append(uncached, j)
			}
			continue
		}
		out[keys[j]] = store.MessageState{StateKey: keys[j], Type: stateTypes[c.typ], EventTime: fromMS(c.event),
			ErrorCode: int(c.code), UpdatedAt: fromMS(c.stamp)}
	}
	known = uncached
	unknown, err := s.numbered(ctx, keys, unknown)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get states: %w", err)
	}
	// A message's state is its state row (entry ''), or, without one, the
	// receipt row it was applied as (applied ≠ 0) that is greatest by the
	// merge order: each apply raised the state, so that is the last one.
	var r stateRowScan
	var num int64
	var i int
	file := func(k store.StateKey) {
		if r.entry == "" {
			if r.explicit == nil {
				r.explicit = map[store.StateKey]bool{}
			}
			r.explicit[k] = true
		} else if r.explicit[k] {
			return
		}
		st := store.MessageState{StateKey: k, Type: wamux.ReceiptType(r.typ), EventTime: fromMS(r.event),
			ErrorCode: r.code, UpdatedAt: fromMS(r.stamp)}
		if r.entry != "" {
			st.Type, st.UpdatedAt = wamux.ReceiptType(r.entry), fromMS(r.applied)
			if cur, ok := out[k]; ok && !mergeAbove(st.Type, cur.Type, ms(st.EventTime), ms(cur.EventTime), st.ErrorCode, cur.ErrorCode) {
				return
			}
		}
		out[k] = st
	}
	err = s.queryKeyed(ctx, known, func(rows int) string {
		// The dispatcher asks for one key after every accepted send; a
		// plain key lookup skips the VALUES table.
		if rows == 1 {
			return `SELECT ?, entry, type, event_time, error_code, stamp, applied FROM message_receipts
			WHERE seq = ? AND (entry = '' OR applied <> 0)`
		}
		return multiInsert("WITH k(i, s) AS (VALUES ", 2, rows,
			`) SELECT k.i, r.entry, r.type, r.event_time, r.error_code, r.stamp, r.applied
			FROM k JOIN message_receipts r ON r.seq = k.s AND (r.entry = '' OR r.applied <> 0)`)
	}, func(args []any, j int) []any {
		return append(args, j, seq[j])
	}, func(rows *sql.Rows) error {
		if err := rows.Scan(&i, &r.entry, &r.typ, &r.event, &r.code, &r.stamp, &r.applied); err != nil {
			return err
		}
		file(keys[i])
		return nil
	})
	if err == nil {
		err = s.queryKeyed(ctx, unknown, func(rows int) string {
			if rows == 1 {
				return `SELECT ?, mk.seq, s.entry, s.type, s.event_time, s.error_code, s.stamp, s.applied
				FROM message_key_index mk JOIN message_receipts s ON s.seq = mk.seq AND (s.entry = '' OR s.applied <> 0)
				WHERE mk.account_id = ? AND mk.message_id = ?`
			}
			return multiInsert("WITH k(i, a, m) AS (VALUES ", 3, rows,
				`) SELECT k.i, mk.seq, s.entry, s.type, s.event_time, s.error_code, s.stamp, s.applied
				FROM k JOIN message_key_index mk ON mk.account_id = k.a AND mk.message_id = k.m
				JOIN message_receipts s ON s.seq = mk.seq AND (s.entry = '' OR s.applied <> 0)`)
		}, func(args []any, j int) []any {
			return append(args, j, keys[j].AccountID, keys[j].MessageID)
		}, func(rows *sql.Rows) error {
			if err := rows.Scan(&i, &num, &r.entry, &r.typ, &r.event, &r.code, &r.stamp, &r.applied); err != nil {
				return err
			}
			s.numbers.put(s.numbers.hash(keys[i]), num)
			file(keys[i])
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get states: %w", err)
	}
	return out, nil
}

// stateRowScan is one row GetStates reads: a state row or an applied
// receipt row; explicit records the messages a state row was seen for.
type stateRowScan struct {
	entry, typ            string
	event, stamp, applied int64
	code                  int
	explicit              map[store.StateKey]bool
}

// PutStates inserts or replaces merged statuses; a zero UpdatedAt is
// stamped with the store's clock. For a key given twice the last one wins.
func (s *Store) PutStates(ctx context.Context, states []store.MessageState) error {
	if len(states) == 0 {
		return nil
	}
	keys, err := validateStates(states)
	if err != nil {
		return err
	}
	now := ms(s.now())
	return s.write(ctx, func(w *writeTx) error { return w.putStates(states, keys, now) })
}

// validateStates checks that every state names its message and returns
// their keys.
func validateStates(states []store.MessageState) ([]store.StateKey, error) {
	keys := make([]store.StateKey, len(states))
	for i := range states {
		if states[i].AccountID == "" || states[i].MessageID == "" {
			return nil, wamux.Errorf(wamux.EInvalid, "state %d needs account_id and message_id", i)
		}
		keys[i] = states[i].StateKey
	}
	return keys, nil
}

// putStates writes the state rows of PutStates inside the writer's
// transaction; keys are the states' keys, now the stamp of a zero
// UpdatedAt (unix ms).
func (w *writeTx) putStates(states []store.MessageState, keys []store.StateKey, now int64) error {
	seqs, err := w.messageSeqs(keys)
	if err != nil {
		return err
	}
	return w.writeStates(states, seqs, now)
}

// writeStates writes the state rows of states, whose messages are
// numbered seqs.
func (w *writeTx) writeStates(states []store.MessageState, seqs []int64, now int64) error {
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
			if i == j {
				w.states.state(seqs[start+j], cacheable(st, updated))
			}
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
}
