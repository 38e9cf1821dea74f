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
	// filter tells which of the rest the index lacks (keyfilter.go).
	filter  *keyFilter
	tx, req map[store.StateKey]int64
}

func newSeqs(committed *numbers, tail *keyTail, filter *keyFilter) seqs {
	return seqs{committed: committed, tail: tail, filter: filter, tx: map[store.StateKey]int64{}, req: map[store.StateKey]int64{}}
}

// getMany returns the numbers the writer knows for keys: out[i] and
// found[i] for keys[i], from the request, the transaction, or the cache
// and the tail (committedNumbers).
func (c *seqs) getMany(keys []store.StateKey, out []int64) (found []bool) {
	found = make([]bool, len(keys))
	var hs []msgHash
	var at []int
	for i, k := range keys {
		if v, ok := c.req[k]; ok {
			out[i], found[i] = v, true
		} else if v, ok := c.tx[k]; ok {
			out[i], found[i] = v, true
		} else {
			hs = append(hs, c.committed.hash(k))
			at = append(at, i)
		}
	}
	if len(hs) == 0 {
		return found
	}
	seq := make([]int64, len(hs))
	ok := make([]bool, len(hs))
	committedNumbers(c.committed, c.tail, hs, seq, ok)
	for j, i := range at {
		out[i], found[i] = seq[j], ok[j]
	}
	return found
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
// message_key_index, but for those its filter says it lacks, and those it
// lacks too get new numbers, appended to the ledger (migration 0100).
func (w *writeTx) messageSeqs(keys []store.StateKey) ([]int64, error) {
	out := make([]int64, len(keys))
	found := w.seqs.getMany(keys, out)
	var fresh, lookup []store.StateKey
	var seen map[store.StateKey]bool
	for i, k := range keys {
		if found[i] {
			continue
		}
		if !seen[k] {
			if seen == nil {
				seen = map[store.StateKey]bool{}
			}
			seen[k] = true
			fresh = append(fresh, k)
			if !w.seqs.filter.absent(w.seqs.committed.hash(k)) {
				lookup = append(lookup, k)
			}
		}
	}
	if len(fresh) == 0 {
		return out, nil
	}
	if err := w.lookupMessageKeys(lookup); err != nil {
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
	return w.keyRows(keys, "WITH k(a, m) AS (VALUES ",
		") SELECT ix.account_id, ix.message_id, ix.seq FROM k JOIN message_key_index ix ON ix.account_id = k.a AND ix.message_id = k.m")
}

// appendMessageKeys numbers the distinct unnumbered messages keys, in
// order after the ledger's highest number, and files the numbers in the
// request's part of the cache. The writer holds the only write lock, so
// it hands the numbers out itself: a plain insert with the numbers bound
// costs the writer about half of one that lets SQLite pick them and
// returns them. Chunks are padded with copies of their last row, number
// included, so few statement texts exist; a copy conflicts with its
// original and is skipped, and any other conflict (a number taken twice)
// fails the request rather than give two messages one number.
func (w *writeTx) appendMessageKeys(keys []store.StateKey) error {
	if len(keys) == 0 {
		return nil
	}
	var last int64
	if _, err := w.queryRow(`SELECT coalesce(max(seq), 0) FROM message_keys`, nil, &last); err != nil {
		return fmt.Errorf("sqlite: message keys: %w", wrapErr(err))
	}
	for start := 0; start < len(keys); start += maxKeyRows {
		chunk := keys[start:min(start+maxKeyRows, len(keys))]
		rows := padRows(len(chunk))
		args := w.argBuf(rows * 3)
		for i := 0; i < rows; i++ {
			j := min(i, len(chunk)-1)
			args = append(args, last+int64(start+j)+1, chunk[j].AccountID, chunk[j].MessageID)
		}
		res, err := w.exec(multiInsert("INSERT INTO message_keys (seq, account_id, message_id) VALUES ", 3, rows,
			" ON CONFLICT (seq) DO NOTHING"), args...)
		w.keepArgs(args)
		if err != nil {
			return fmt.Errorf("sqlite: message keys: %w", wrapErr(err))
		}
		if n, err := res.RowsAffected(); err != nil || n != int64(len(chunk)) {
			return fmt.Errorf("sqlite: message keys: %d of %d new numbers inserted (%v); the ledger's numbers after %d are taken",
				n, len(chunk), err, last+int64(start))
		}
	}
	for i, k := range keys {
		w.seqs.req[k] = last + int64(i) + 1
		w.states.numbered(last + int64(i) + 1)
	}
	return nil
}

// keyRows runs prefix, a VALUES list of (account, message id) rows, and
// suffix over keys in chunks; each statement returns (account_id,
// message_id, seq) rows, which scanSeqs files. Chunks are padded with
// copies of their last key, so few statement texts exist: a copy answers
// twice with the same number.
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
