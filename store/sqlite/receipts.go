package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

const receiptCols = `message_id, account_id, receipt_type, event_time, callback_data, recipient,
	error_code, error_title, source, received_at`

// storedReceiptCols are the columns of a receipt row in message_receipts,
// where the message's number (message_keys, migrations 0090 and 0100)
// stands for its provider id and account, its type is its entry and
// received_at its stamp.
const storedReceiptCols = `seq, entry, event_time, callback_data, recipient,
	error_code, error_title, source, stamp, applied`

// listedReceiptCols reads a receipt row back, joined to message_keys or
// message_key_index as mk and message_receipts as r, in receiptCols order
// for scanReceipt.
const listedReceiptCols = `mk.message_id, mk.account_id, r.entry, r.event_time, r.callback_data, r.recipient,
	r.error_code, r.error_title, r.source, r.stamp`

const receiptColCount = 10

// maxReceiptRows: 2048 rows × 10 columns stays under SQLite's 32766 bound
// variables; larger statements gain nothing measurable.
const maxReceiptRows = 2048

// maxKeyRows bounds the VALUES list of key lookups.
const maxKeyRows = 1024

// InsertReceipts inserts the distinct receipts of rs in multi-row
// statements with ON CONFLICT DO NOTHING; the keys RETURNING reports are
// the new ones.
func (s *Store) InsertReceipts(ctx context.Context, rs []wamux.Receipt) ([]bool, error) {
	return s.InsertReceiptsPutStates(ctx, rs, nil)
}

// InsertReceiptsPutStates stores rs and writes states in one write
// request (store.ReceiptStateWriter): the states' messages are numbered by
// then, and their rows sit on the pages the receipts just dirtied.
func (s *Store) InsertReceiptsPutStates(ctx context.Context, rs []wamux.Receipt, states []store.MessageState) ([]bool, error) {
	if len(rs) == 0 && len(states) == 0 {
		return nil, nil
	}
	if err := store.ValidateReceipts(rs); err != nil {
		return nil, err
	}
	if _, err := validateStates(states); err != nil {
		return nil, err
	}
	first := make(map[store.ReceiptKey]struct{}, len(rs))
	uniq := make([]int, 0, len(rs))
	keys := make([]store.StateKey, 0, len(rs))
	for i := range rs {
		k := store.ReceiptKey{MessageID: rs[i].MessageID, AccountID: rs[i].AccountID, Type: rs[i].Type}
		if _, ok := first[k]; !ok {
			first[k] = struct{}{}
			uniq = append(uniq, i)
			keys = append(keys, store.StateKey{AccountID: rs[i].AccountID, MessageID: rs[i].MessageID})
		}
	}
	var out []bool
	if len(rs) > 0 {
		out = make([]bool, len(rs))
	}
	now := ms(s.now())
	err := s.writeOrdered(ctx, func(w *writeTx) error {
		var seqs []int64
		// The states are most often of the receipts' messages, numbered
		// here: seqOf keeps those numbers for them.
		var seqOf map[store.StateKey]int64
		// winner[i] is the receipt (index into rs) that state i is, when
		// that state may be derived from it; applied marks it.
		var winner []int
		var applied []int64
		if len(uniq) > 0 {
			var err error
			if seqs, err = w.messageSeqs(keys); err != nil {
				return err
			}
			if len(states) > 0 {
				seqOf = make(map[store.StateKey]int64, len(keys))
				for j, k := range keys {
					seqOf[k] = seqs[j]
				}
				winner, applied = w.derivableStates(rs, uniq, seqOf, states, now)
			}
			uniq, seqs = inTableOrder(rs, uniq, seqs)
			for start := 0; start < len(uniq); start += maxReceiptRows {
				end := min(start+maxReceiptRows, len(uniq))
				if err := insertReceiptChunk(w, rs, uniq[start:end], seqs[start:end], applied, out, now); err != nil {
					return err
				}
				for j, i := range uniq[start:end] {
					// The row carries callback data only if this receipt
					// made it: a repeat leaves the stored row as it was.
					w.states.receipt(seqs[start+j], rs[i].Type, out[i] && rs[i].CallbackData != "")
				}
			}
		}
		// A state whose receipt went in fresh, marked applied, needs no
		// row; the rest are written as rows, under the numbers known here
		// or looked up.
		var rowStates []store.MessageState
		var rowSeqs []int64
		var rest []int // indexes into rowStates without a number yet
		for i := range states {
			st := &states[i]
			if winner != nil && winner[i] >= 0 && out[winner[i]] {
				w.states.derived(seqOf[st.StateKey], cacheable(st, applied[winner[i]]))
				continue
			}
			v, ok := seqOf[st.StateKey]
			if !ok {
				rest = append(rest, len(rowStates))
			}
			rowStates = append(rowStates, *st)
			rowSeqs = append(rowSeqs, v)
		}
		if len(rest) > 0 {
			restKeys := make([]store.StateKey, len(rest))
			for j, i := range rest {
				restKeys[j] = rowStates[i].StateKey
			}
			got, err := w.messageSeqs(restKeys)
			if err != nil {
				return err
			}
			for j, i := range rest {
				rowSeqs[i] = got[j]
			}
		}
		if len(rowStates) == 0 {
			return nil
		}
		return w.writeStates(rowStates, rowSeqs, now)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// inTableOrder returns the distinct receipts uniq and their message
// numbers seqs sorted as message_receipts is, by (seq, entry). Rows
// inserted in key order walk the table once, leaf after leaf, and new
// messages' rows append at its end; in arrival order each row was a seek
// to a page of its own.
func inTableOrder(rs []wamux.Receipt, uniq []int, seqs []int64) ([]int, []int64) {
	type row struct {
		seq int64
		i   int
	}
	rows := make([]row, len(uniq))
	for j, i := range uniq {
		rows[j] = row{seqs[j], i}
	}
	slices.SortFunc(rows, func(a, b row) int {
		if c := cmp.Compare(a.seq, b.seq); c != 0 {
			return c
		}
		return strings.Compare(string(rs[a.i].Type), string(rs[b.i].Type))
	})
	u, q := make([]int, len(rows)), make([]int64, len(rows))
	for j, r := range rows {
		u[j], q[j] = r.i, r.seq
	}
	return u, q
}

// derivableStates finds, for each state, the receipt of rs that it is
// (same message, type, event time and error code; among the distinct
// receipts uniq, whose messages seqOf numbers) when its message may do
// without a state row (pendingStates.derivable), and returns their
// indexes (winner[i], -1 for none) and the apply time to store on each
// such receipt (the state's UpdatedAt, or now when zero), nil when there
// is none.
func (w *writeTx) derivableStates(rs []wamux.Receipt, uniq []int, seqOf map[store.StateKey]int64, states []store.MessageState, now int64) (winner []int, applied []int64) {
	type typed struct {
		k store.StateKey
		t wamux.ReceiptType
	}
	at := make(map[typed]int, len(uniq))
	for _, i := range uniq {
		at[typed{store.StateKey{AccountID: rs[i].AccountID, MessageID: rs[i].MessageID}, rs[i].Type}] = i
	}
	// A message given two states here keeps rows (the last one wins).
	given := make(map[store.StateKey]int, len(states))
	for n := range states {
		given[states[n].StateKey]++
	}
	winner = make([]int, len(states))
	for n := range states {
		winner[n] = -1
		st := &states[n]
		i, ok := at[typed{st.StateKey, st.Type}]
		if !ok || given[st.StateKey] > 1 || ms(rs[i].EventTime) != ms(st.EventTime) || rs[i].ErrorCode != st.ErrorCode {
			continue
		}
		stamp := ms(st.UpdatedAt)
		if stamp == 0 {
			stamp = now
		}
		next := cacheable(st, stamp)
		if next.typ == 0 || !w.states.derivable(seqOf[st.StateKey], next) {
			continue
		}
		if applied == nil {
			applied = make([]int64, len(rs))
		}
		applied[i] = stamp
		winner[n] = i
	}
	if applied == nil {
		return nil, nil
	}
	return winner, applied
}

// HasReceipts looks the keys up in chunks, joining a VALUES list against
// the primary key: by number for the messages whose numbers the cache
// holds or the ledger's tail knows, through message_key_index for the
// rest.
func (s *Store) HasReceipts(ctx context.Context, keys []store.ReceiptKey) ([]bool, error) {
	return s.hasReceipts(ctx, keys, false)
}

// HasCallbackReceipts looks the keys up as HasReceipts does, and reports
// only the receipt rows that carry callback data.
func (s *Store) HasCallbackReceipts(ctx context.Context, keys []store.ReceiptKey) ([]bool, error) {
	return s.hasReceipts(ctx, keys, true)
}

// The queries of hasReceipts: by message number and through
// message_key_index, for any receipt row or (Callback) for one that
// carries callback data. Constants, so that multiInsert's texts are cached
// under them without building a suffix per call.
const (
	hasReceiptsBySeq = ") SELECT k.i FROM k JOIN message_receipts r ON r.seq = k.s AND r.entry = k.t AND r.entry <> ''"
	hasReceiptsByKey = ") SELECT k.i, mk.seq FROM k JOIN message_key_index mk ON mk.account_id = k.a AND mk.message_id = k.m " +
		"JOIN message_receipts r ON r.seq = mk.seq AND r.entry = k.t AND r.entry <> ''"
	hasCallbackReceiptsBySeq = hasReceiptsBySeq + " AND r.callback_data <> ''"
	hasCallbackReceiptsByKey = hasReceiptsByKey + " AND r.callback_data <> ''"
)

// hasReceipts answers HasReceipts, or HasCallbackReceipts when callback:
// from the state cache for the messages the writer numbered lately, from
// the table for the rest.
func (s *Store) hasReceipts(ctx context.Context, keys []store.ReceiptKey, callback bool) ([]bool, error) {
	out := make([]bool, len(keys))
	msgs := make([]store.StateKey, len(keys))
	for i, k := range keys {
		msgs[i] = store.StateKey{AccountID: k.AccountID, MessageID: k.MessageID}
	}
	seq := make([]int64, len(keys))
	known, unknown := s.lookupNumbers(msgs, seq)
	// Messages the writer numbered lately are answered from memory.
	uncached := known[:0]
	for _, j := range known {
		c, _ := s.states.get(seq[j])
		if has, ok := c.hasReceipt(keys[j].Type, callback); ok {
			out[j] = has
		} else {
			uncached = append(uncached, j)
		}
	}
	known = uncached
	unknown, err := s.numbered(ctx, msgs, unknown)
	if err != nil {
		return nil, fmt.Errorf("sqlite: has receipts: %w", err)
	}
	bySeq, byKey := hasReceiptsBySeq, hasReceiptsByKey
	if callback {
		bySeq, byKey = hasCallbackReceiptsBySeq, hasCallbackReceiptsByKey
	}
	var i int
	var num int64
	err = s.queryKeyed(ctx, known, func(rows int) string {
		return multiInsert("WITH k(i, s, t) AS (VALUES ", 3, rows, bySeq)
	}, func(args []any, j int) []any {
		return append(args, j, seq[j], string(keys[j].Type))
	}, func(rows *sql.Rows) error {
		if err := rows.Scan(&i); err != nil {
			return err
		}
		out[i] = true
		return nil
	})
	if err == nil {
		err = s.queryKeyed(ctx, unknown, func(rows int) string {
			return multiInsert("WITH k(i, m, a, t) AS (VALUES ", 4, rows, byKey)
		}, func(args []any, j int) []any {
			return append(args, j, keys[j].MessageID, keys[j].AccountID, string(keys[j].Type))
		}, func(rows *sql.Rows) error {
			if err := rows.Scan(&i, &num); err != nil {
				return err
			}
			s.numbers.put(s.numbers.hash(msgs[i]), num)
			out[i] = true
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: has receipts: %w", err)
	}
	return out, nil
}

func scanReceipt(sc scanner, r *wamux.Receipt) error {
	var typ string
	var event, received int64
	if err := sc.Scan(&r.MessageID, &r.AccountID, &typ, &event, &r.CallbackData, &r.Recipient,
		&r.ErrorCode, &r.ErrorTitle, &r.Source, &received); err != nil {
		return err
	}
	r.Type, r.EventTime, r.ReceivedAt = wamux.ReceiptType(typ), fromMS(event), fromMS(received)
	return nil
}

// ListReceipts returns the receipts of one provider message by event time.
func (s *Store) ListReceipts(ctx context.Context, accountID, messageID string) ([]wamux.Receipt, error) {
	var seq [1]int64
	var rows *sql.Rows
	var err error
	if known, _ := s.lookupNumbers([]store.StateKey{{AccountID: accountID, MessageID: messageID}}, seq[:]); len(known) == 1 {
		rows, err = s.rquery(ctx, `SELECT `+listedReceiptCols+` FROM message_keys mk
			JOIN message_receipts r ON r.seq = mk.seq AND r.entry <> ''
			WHERE mk.seq = ? ORDER BY r.event_time, r.entry`, seq[0])
	} else {
		rows, err = s.rquery(ctx, `SELECT `+listedReceiptCols+` FROM message_key_index mk
			JOIN message_receipts r ON r.seq = mk.seq AND r.entry <> ''
			WHERE mk.account_id = ? AND mk.message_id = ? ORDER BY r.event_time, r.entry`, accountID, messageID)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: list receipts: %w", wrapErr(err))
	}
	defer rows.Close()
	var out []wamux.Receipt
	for rows.Next() {
		var r wamux.Receipt
		if err := scanReceipt(rows, &r); err != nil {
			return nil, fmt.Errorf("sqlite: list receipts: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list receipts: %w", wrapErr(err))
	}
	return out, nil
}
