package sqlite

import (
	"fmt"

	"github.com/wamux/wamux/store"
)

// seqs is the writer's view of message numbers: the committed ones in
// the store's shared cache (numbers.go) and in the ledger's tail
// (keyindex.go), and apart from them the ones learned inside the open
// transaction, which a request that fails, or a commit that does, may
// roll back with the ledger rows they name.
type seqs struct {
	committed *numbers
	tail      *keyTail
	tx, req   map[store.StateKey]int64
}

func newSeqs(committed *numbers, tail *keyTail) seqs {
	return seqs{committed: committed, tail: tail, tx: map[store.StateKey]int64{}, req: map[store.StateKey]int64{}}
}

func (c *seqs) get(k store.StateKey) (int64, bool) {
	if v, ok := c.req[k]; ok {
		return v, true
	}
	if v, ok := c.tx[k]; ok {
		return v, true
	}
	h := c.committed.hash(k)
	if v, ok := c.committed.get(h); ok {
		return v, true
	}
	return c.tail.get(h)
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

// txDone moves what a committed transaction learned into the cache and
// the tail (which keeps only the numbers the index lacks), or forgets it
// when the transaction was rolled back.
func (c *seqs) txDone(committed bool) {
	c.requestDone(committed)
	if committed && len(c.tx) > 0 {
		ks := make([]keyNumber, 0, len(c.tx))
		for k, v := range c.tx {
			h := c.committed.hash(k)
			c.committed.put(h, v)
			ks = append(ks, keyNumber{h, k, v})
		}
		c.tail.add(ks)
	}
	clear(c.tx)
}

// messageSeqs returns, for each key, the number under which
// message_receipts files the message (migration 0090), giving the
// messages that have none the next numbers. Keys may repeat; out[i] is
// key i's number.
//
// Numbers come from the cache and the ledger's tail, which together know
// every message numbered lately; the rest are looked up in
// message_key_index, and those it lacks too get new numbers, appended to
// the ledger (migration 0100).
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
	if err := w.lookupMessageKeys(fresh); err != nil {
		return nil, err
	}
	var unnumbered []store.StateKey
	for _, k := range fresh {
		if _, ok := w.seqs.req[k]; !ok {
			unnumbered = append(unnumbered, k)
		}
	}
	if err := w.appendMessageKeys(unnumbered); err != nil {
		return nil, err
	}
	for i, k := range keys {
		if out[i] == 0 {
			v, ok := w.seqs.req[k]
			if !ok {
				return nil, fmt.Errorf("sqlite: message keys: no number for %s/%s after appending it", k.AccountID, k.MessageID)
			}
			out[i] = v
		}
	}
	return out, nil
}

// lookupMessageKeys files the numbers the index holds for keys in the
// request's part of the cache.
func (w *writeTx) lookupMessageKeys(keys []store.StateKey) error {
	return w.keyRows(keys, false, "WITH k(a, m) AS (VALUES ",
		") SELECT ix.account_id, ix.message_id, ix.seq FROM k JOIN message_key_index ix ON ix.account_id = k.a AND ix.message_id = k.m")
}

// appendMessageKeys numbers the distinct unnumbered messages keys and
// files the numbers in the request's part of the cache. The ledger has no
// unique key to ignore padding copies by, so each VALUES row carries a
// flag, 1 on the chunk's real rows and 0 on the copies, and only flagged
// rows are inserted: a copy inserted would give its message a second
// number.
func (w *writeTx) appendMessageKeys(keys []store.StateKey) error {
	return w.keyRows(keys, true, "INSERT INTO message_keys (account_id, message_id) SELECT column1, column2 FROM (VALUES ",
		") WHERE column3 = 1 RETURNING account_id, message_id, seq")
}

// keyRows runs prefix, a VALUES list of (account, message id) rows, and
// suffix over keys in chunks; each statement returns (account_id,
// message_id, seq) rows, which scanSeqs files. Chunks are padded with
// copies of their last key, so few statement texts exist: looked up, a
// copy answers twice with the same number. With flagged, each row has a
// third value: 1 for a real row, 0 for a copy.
func (w *writeTx) keyRows(keys []store.StateKey, flagged bool, prefix, suffix string) error {
	cols := 2
	if flagged {
		cols = 3
	}
	for start := 0; start < len(keys); start += maxKeyRows {
		chunk := keys[start:min(start+maxKeyRows, len(keys))]
		rows := padRows(len(chunk))
		args := w.argBuf(rows * cols)
		for i := 0; i < rows; i++ {
			k := &chunk[min(i, len(chunk)-1)]
			args = append(args, k.AccountID, k.MessageID)
			if flagged {
				args = append(args, boolInt(i < len(chunk)))
			}
		}
		err := w.scanSeqs(multiInsert(prefix, cols, rows, suffix), args)
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

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
