package sqlite

import (
	"fmt"
	"strings"

	"github.com/wamux/wamux/store"
)

// seqCacheGen is how many message numbers one generation of the writer's
// cache holds; with the previous generation it keeps up to twice that
// (about 15 MiB at 128,000 entries). Its job is the repeat within seconds:
// the pipeline stores a batch's receipts and, a moment later, the same
// messages' states, and each would otherwise look the numbers up again.
const seqCacheGen = 64 << 10

// seqs remembers message numbers for the writer. A number never changes
// once committed (nothing deletes from message_keys; a retention job that
// does must clear this cache), so committed entries stay true even when
// another process writes the same file. Entries learned inside a
// transaction are held apart until it commits: a request that fails, or a
// commit that does, may have rolled back the key rows they name.
type seqs struct {
	cur, prev map[store.StateKey]int64
	tx, req   map[store.StateKey]int64
}

func newSeqs() seqs {
	return seqs{cur: map[store.StateKey]int64{}, prev: map[store.StateKey]int64{},
		tx: map[store.StateKey]int64{}, req: map[store.StateKey]int64{}}
}

func (c *seqs) get(k store.StateKey) (int64, bool) {
	if v, ok := c.req[k]; ok {
		return v, true
	}
	if v, ok := c.tx[k]; ok {
		return v, true
	}
	if v, ok := c.cur[k]; ok {
		return v, true
	}
	if v, ok := c.prev[k]; ok {
		c.put(k, v) // still in use: carry it into the current generation
		return v, true
	}
	return 0, false
}

// put files a committed number; the ids are cloned so that the cache
// does not keep the request body they were decoded from.
func (c *seqs) put(k store.StateKey, v int64) {
	if len(c.cur) >= seqCacheGen {
		c.prev, c.cur = c.cur, make(map[store.StateKey]int64, seqCacheGen)
	}
	c.cur[store.StateKey{AccountID: strings.Clone(k.AccountID), MessageID: strings.Clone(k.MessageID)}] = v
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
			c.put(k, v)
		}
	}
	clear(c.tx)
}

// messageSeqs returns, for each key, the number under which
// message_receipts files the message (migration 0090), giving the
// messages that have none the next numbers. Keys may repeat; out[i] is
// key i's number.
//
// Numbers come from the cache, then from one multi-row lookup; only the
// messages still unnumbered are inserted, with RETURNING. Most receipts of
// a message after its first find it numbered, so they cost one lookup.
func (w *writeTx) messageSeqs(keys []store.StateKey) ([]int64, error) {
	out := make([]int64, len(keys))
	var miss []int
	for i, k := range keys {
		if v, ok := w.seqs.get(k); ok {
			out[i] = v
		} else {
			miss = append(miss, i)
		}
	}
	if len(miss) == 0 {
		return out, nil
	}
	for start := 0; start < len(miss); start += maxKeyRows {
		chunk := miss[start:min(start+maxKeyRows, len(miss))]
		rows := padRows(len(chunk))
		args := w.argBuf(rows * 3)
		for i := 0; i < rows; i++ {
			// Padding repeats the last key, found or inserted once.
			j := chunk[min(i, len(chunk)-1)]
			args = append(args, j, keys[j].AccountID, keys[j].MessageID)
		}
		err := w.scanSeqs(multiInsert("WITH k(i, a, m) AS (VALUES ", 3, rows,
			") SELECT k.i, mk.seq FROM k JOIN message_keys mk ON mk.account_id = k.a AND mk.message_id = k.m"), args, out)
		w.keepArgs(args)
		if err != nil {
			return nil, err
		}
	}
	var fresh []store.StateKey
	seen := map[store.StateKey]bool{}
	for _, i := range miss {
		if out[i] != 0 { // rowids start at 1
			w.seqs.req[keys[i]] = out[i]
		} else if !seen[keys[i]] {
			seen[keys[i]] = true
			fresh = append(fresh, keys[i])
		}
	}
	if err := w.insertMessageKeys(fresh); err != nil {
		return nil, err
	}
	for _, i := range miss {
		if out[i] == 0 {
			v, ok := w.seqs.req[keys[i]]
			if !ok {
				return nil, fmt.Errorf("sqlite: message keys: no number for %s/%s after inserting it", keys[i].AccountID, keys[i].MessageID)
			}
			out[i] = v
		}
	}
	return out, nil
}

// insertMessageKeys numbers the distinct new messages fresh, in their
// order, and files the numbers in the request's part of the cache.
func (w *writeTx) insertMessageKeys(fresh []store.StateKey) error {
	for start := 0; start < len(fresh); start += maxKeyRows {
		chunk := fresh[start:min(start+maxKeyRows, len(fresh))]
		rows := padRows(len(chunk))
		args := w.argBuf(rows * 2)
		for i := 0; i < rows; i++ {
			// Padding repeats the last key: its copies conflict and are
			// ignored.
			k := &chunk[min(i, len(chunk)-1)]
			args = append(args, k.AccountID, k.MessageID)
		}
		err := w.scanNewSeqs(multiInsert("INSERT INTO message_keys (account_id, message_id) VALUES ", 2, rows,
			" ON CONFLICT DO NOTHING RETURNING account_id, message_id, seq"), args)
		w.keepArgs(args)
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *writeTx) scanNewSeqs(q string, args []any) error {
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

func (w *writeTx) scanSeqs(q string, args []any, out []int64) error {
	rows, err := w.query(q, args...)
	if err != nil {
		return fmt.Errorf("sqlite: message keys: %w", wrapErr(err))
	}
	defer rows.Close()
	for rows.Next() {
		var i int
		var seq int64
		if err := rows.Scan(&i, &seq); err != nil {
			return fmt.Errorf("sqlite: message keys: %w", err)
		}
		out[i] = seq
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlite: message keys: %w", wrapErr(err))
	}
	return nil
}
