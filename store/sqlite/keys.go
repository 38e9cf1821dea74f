package sqlite

import (
	"fmt"

	"github.com/wamux/wamux/store"
)

// seqs is the writer's view of message numbers: the committed ones in
// the store's shared cache (numbers.go), and apart from them the ones
// learned inside the open transaction, which a request that fails, or a
// commit that does, may roll back with the key rows they name.
type seqs struct {
	committed *numbers
	tx, req   map[store.StateKey]int64
}

func newSeqs(committed *numbers) seqs {
	return seqs{committed: committed, tx: map[store.StateKey]int64{}, req: map[store.StateKey]int64{}}
}

func (c *seqs) get(k store.StateKey) (int64, bool) {
	if v, ok := c.req[k]; ok {
		return v, true
	}
	if v, ok := c.tx[k]; ok {
		return v, true
	}
	return c.committed.get(c.committed.hash(k))
}

// requestDone keeps what a request learned for the rest of the
// transaction, or forgets it when the request was rolled back.
func (c *seqs) requestDone(ok bool) {
	if ok {
		for k, v := range c.req {
			c.tx[k] = v
		}
	}
	clear(c.req)
}

// txDone moves what a committed transaction learned into the cache, or
// forgets it when the transaction was rolled back.
func (c *seqs) txDone(committed bool) {
	c.requestDone(committed)
	if committed {
		for k, v := range c.tx {
			c.committed.put(c.committed.hash(k), v)
		}
	}
	clear(c.tx)
}

// messageSeqs returns, for each key, the number under which
// message_receipts files the message (migration 0090), giving the
// messages that have none the next numbers. Keys may repeat; out[i] is
// key i's number.
//
// Numbers come from the cache; the messages it does not know are
// inserted first, with RETURNING, and only those the insert finds
// numbered already are looked up. A message the cache does not know is
// most often one seen for the first time, which this way costs one
// statement instead of a lookup that finds nothing and then the insert.
func (w *writeTx) messageSeqs(keys []store.StateKey) ([]int64, error) {
	out := make([]int64, len(keys))
	var fresh []store.StateKey
	var seen map[store.StateKey]bool
	for i, k := range keys {
		if v, ok := w.seqs.get(k); ok {
			out[i] = v
		} else if !seen[k] {
			if seen == nil {
				seen = map[store.StateKey]bool{}
			}
			seen[k] = true
			fresh = append(fresh, k)
		}
	}
	if len(fresh) == 0 {
		return out, nil
	}
	if err := w.insertMessageKeys(fresh); err != nil {
		return nil, err
	}
	var old []store.StateKey
	for _, k := range fresh {
		if _, ok := w.seqs.req[k]; !ok {
			old = append(old, k)
		}
	}
	if err := w.lookupMessageKeys(old); err != nil {
		return nil, err
	}
	for i, k := range keys {
		if out[i] == 0 {
			v, ok := w.seqs.req[k]
			if !ok {
				return nil, fmt.Errorf("sqlite: message keys: no number for %s/%s after inserting it", k.AccountID, k.MessageID)
			}
			out[i] = v
		}
	}
	return out, nil
}

// lookupMessageKeys files the numbers of the numbered messages keys in
// the request's part of the cache.
func (w *writeTx) lookupMessageKeys(keys []store.StateKey) error {
	return w.keyRows(keys, "WITH k(a, m) AS (VALUES ",
		") SELECT mk.account_id, mk.message_id, mk.seq FROM k JOIN message_keys mk ON mk.account_id = k.a AND mk.message_id = k.m")
}

// insertMessageKeys numbers the distinct new messages fresh, in their
// order, and files the numbers in the request's part of the cache; the
// messages numbered already are left out of RETURNING.
func (w *writeTx) insertMessageKeys(fresh []store.StateKey) error {
	return w.keyRows(fresh, "INSERT INTO message_keys (account_id, message_id) VALUES ",
		" ON CONFLICT DO NOTHING RETURNING account_id, message_id, seq")
}

// keyRows runs prefix, a VALUES list of (account, message id) rows, and
// suffix over keys in chunks; each statement returns (account_id,
// message_id, seq) rows, which scanSeqs files. Chunks are padded with
// copies of their last key, so few statement texts exist: looked up, a
// copy answers twice with the same number; inserted, it conflicts with
// the first and is ignored.
func (w *writeTx) keyRows(keys []store.StateKey, prefix, suffix string) error {
	for start := 0; start < len(keys); start += maxKeyRows {
		chunk := keys[start:min(start+maxKeyRows, len(keys))]
		rows := padRows(len(chunk))
		args := w.argBuf(rows * 2)
		for i := 0; i < rows; i++ {
			k := &chunk[min(i, len(chunk)-1)]
			args = append(args, k.AccountID, k.MessageID)
		}
		err := w.scanSeqs(multiInsert(prefix, 2, rows, suffix), args)
		w.keepArgs(args)
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *writeTx) scanSeqs(q string, args []any) error {
	rows, err := w.query(q, args...)
	if err != nil {
		return fmt.Errorf("sqlite: message keys: %w", wrapErr(err))
	}
	defer rows.Close()
	for rows.Next() {
		var k store.StateKey
		var seq int64
		if err := rows.Scan(&k.AccountID, &k.MessageID, &seq); err != nil {
			return fmt.Errorf("sqlite: message keys: %w", err)
		}
		w.seqs.req[k] = seq
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlite: message keys: %w", wrapErr(err))
	}
	return nil
}
