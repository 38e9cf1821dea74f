package sqlite

import (
	"context"
	"fmt"
	"math/bits"
	"sync/atomic"

	"github.com/wamux/wamux/store"
)

// keyFilter is a Bloom filter of the messages message_key_index holds, so
// that a message neither the number cache nor the ledger's tail knows
// (most often a new one: its first receipt) is numbered without a lookup
// in the index first. Such a lookup finds nothing, but costs the single
// writer a descent of a text-keyed B-tree all the same.
//
// It must never miss a message the index holds; a false positive only
// costs the lookup. What the index held when the store opened is added by
// a scan on a read connection, and until that scan is done the filter
// answers "maybe" for everything (ready). Every fill of this store adds
// its messages before its transaction commits and before the tail lets
// go of them. Messages another process sharing the file files are in this
// store's tail already, or reach it at the start of the writer's next
// transaction (catchUp), and leave it only through this store's own
// fills: the writer, which looks in the tail first, does not need the
// filter to know them.
//
// It is sized when the store opens for twice the index then, at ten bits
// a message (about 1 % false positives), at least for 1 Mi messages and
// at most keyFilterMaxBytes. An index that outgrows it only raises the
// false-positive rate, that is the share of lookups still made, until the
// next open sizes it again.
//
// keyFilter is safe for concurrent use.
type keyFilter struct {
	words []atomic.Uint64
	mask  uint64 // bits - 1; the bit count is a power of two
	ready atomic.Bool
	// broken: the index got messages the filter was not told about (a
	// fill that filed its range from the ledger, never expected); it
	// answers "maybe" from then on.
	broken atomic.Bool
}

const (
	keyFilterHashes   = 7
	keyFilterMinKeys  = 1 << 20
	keyFilterMaxBytes = 64 << 20
)

// newKeyFilter sizes a filter for keys messages.
func newKeyFilter(keys int64) *keyFilter {
	want := uint64(max(keys, keyFilterMinKeys)) * 10
	nbits := uint64(1) << bits.Len64(want-1)
	nbits = min(nbits, keyFilterMaxBytes*8)
	return &keyFilter{words: make([]atomic.Uint64, nbits/64), mask: nbits - 1}
}

// add records h; safe beside other adds and tests.
func (f *keyFilter) add(h msgHash) {
	for i := uint64(0); i < keyFilterHashes; i++ {
		b := (h[0] + i*(h[1]|1)) & f.mask
		f.words[b/64].Or(1 << (b % 64))
	}
}

// usable reports whether absent can answer true at all.
func (f *keyFilter) usable() bool {
	return f != nil && f.ready.Load() && !f.broken.Load()
}

// absent reports whether the index surely lacks h: false until the scan
// of the index is done, and for every message it holds.
func (f *keyFilter) absent(h msgHash) bool {
	if f == nil || !f.ready.Load() || f.broken.Load() {
		return false
	}
	for i := uint64(0); i < keyFilterHashes; i++ {
		b := (h[0] + i*(h[1]|1)) & f.mask
		if f.words[b/64].Load()&(1<<(b%64)) == 0 {
			return true
		}
	}
	return false
}

// loadKeyFilter adds every message of message_key_index to the filter, on
// a read connection, and then declares it ready. It reads the index in
// key order, page rows per query (keyFilterPage from Open), so that no read transaction
// stays open for the whole scan of a large index (an open one keeps
// checkpoints from resetting the WAL). A message filed between two pages
// was added by its fill; one in the index before the scan began is in the
// page that covers its key. It runs on its own goroutine from Open; a
// failure leaves the filter unready (every lookup is made, as without it)
// and is logged.
func (s *Store) loadKeyFilter(ctx context.Context, page int) {
	f := s.filter
	var after store.StateKey
	for {
		n, err := s.loadKeyFilterPage(ctx, &after, page)
		if err != nil {
			if ctx.Err() == nil {
				s.opts.Logger.Warn("sqlite: reading the message key index into its filter failed; every unknown message is looked up",
					"err", fmt.Errorf("sqlite: key filter: %w", err))
			}
			return
		}
		if n < page {
			break
		}
	}
	f.ready.Store(true)
}

const keyFilterPage = 64 << 10

// loadKeyFilterPage adds the next page (up to limit rows) of the index
// after *after to the filter, moves *after to its last key and returns how
// many rows it read.
func (s *Store) loadKeyFilterPage(ctx context.Context, after *store.StateKey, limit int) (int, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT account_id, message_id FROM message_key_index
		WHERE (account_id, message_id) > (?, ?) ORDER BY account_id, message_id LIMIT ?`,
		after.AccountID, after.MessageID, limit)
	if err != nil {
		return 0, wrapErr(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		if err := rows.Scan(&after.AccountID, &after.MessageID); err != nil {
			return n, err
		}
		s.filter.add(s.numbers.hash(*after))
		n++
	}
	return n, wrapErr(rows.Err())
}
