package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/wamux/wamux/store"
)

// keyIndexFillDefault is how many numbers the ledger's tail gathers
// before the writer files them in message_key_index (migration 0100).
// Larger fills dirty fewer index pages per message: a fill of n sorted
// keys touches at most one page per key and at most every page once, so
// once the index outgrows the fill the pages written per new message
// shrink in proportion to it. The price is memory: the tail holds about
// 130 bytes a number with its key.
//
// keyFillChunkDefault is how many of them one transaction files, so that
// a fill does not stall the writer, and every request queued behind it,
// in one long transaction; a chunk is a slice of the sorted keys, so
// chunks together dirty the pages one fill would.
const (
	keyIndexFillDefault = 128 << 10
	keyFillChunkDefault = 4 << 10
)

// keyTail knows, exactly, the committed message numbers that
// message_key_index does not hold yet: every number above upto and up to
// last. It is the part of the numbering that lives only in memory between
// two bulk fills of the index, so unlike the number cache (numbers.go) it
// is never lossy: a message absent from both the tail and the index has no
// number.
//
// The writer adds what it commits, and before each transaction what
// another process sharing the file appended meanwhile (catchUp), so its
// own numbering never misses a number. Readers consult the tail before
// the index; a number another process committed since this writer's last
// transaction may be missing for them, as if they had read a moment
// earlier.
//
// keyTail is safe for concurrent use.
type keyTail struct {
	mu sync.RWMutex
	m  map[msgHash]keyNumber
	// upto: every number ≤ upto is in message_key_index. last: the
	// highest number this process knows to be committed.
	upto, last int64
}

func newKeyTail() *keyTail { return &keyTail{m: map[msgHash]keyNumber{}} }

func (t *keyTail) get(h msgHash) (int64, bool) {
	t.mu.RLock()
	v, ok := t.m[h]
	t.mu.RUnlock()
	return v.seq, ok
}

func (t *keyTail) len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}

// bounds returns upto and last.
func (t *keyTail) bounds() (upto, last int64) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.upto, t.last
}

// filed forgets the numbers up to hi, now in the index.
func (t *keyTail) filed(hi int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for h, v := range t.m {
		if v.seq <= hi {
			delete(t.m, h)
		}
	}
	t.upto = max(t.upto, hi)
}

// upTo returns the tail's numbers up to hi, sorted by key as the index
// sorts them (SQLite compares TEXT bytewise, as Go compares strings).
func (t *keyTail) upTo(hi int64) []keyNumber {
	t.mu.RLock()
	ks := make([]keyNumber, 0, len(t.m))
	for _, v := range t.m {
		if v.seq <= hi {
			ks = append(ks, v)
		}
	}
	t.mu.RUnlock()
	slices.SortFunc(ks, func(a, b keyNumber) int {
		if c := strings.Compare(a.key.AccountID, b.key.AccountID); c != 0 {
			return c
		}
		return strings.Compare(a.key.MessageID, b.key.MessageID)
	})
	return ks
}

// keyNumber is one committed number, the message it names and that
// message's name in the caches.
type keyNumber struct {
	h   msgHash
	key store.StateKey
	seq int64
}

// add files committed numbers; those the index holds already are left out.
func (t *keyTail) add(ks []keyNumber) {
	if len(ks) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range ks {
		if k.seq > t.upto {
			t.m[k.h] = k
		}
		t.last = max(t.last, k.seq)
	}
}

// committedNumbers looks the messages named hs up in the cache, all
// together (numbers.getMany), and those it lacks in the ledger's tail:
// seq[i] and ok[i] for hs[i].
func committedNumbers(n *numbers, t *keyTail, hs []msgHash, seq []int64, ok []bool) {
	n.getMany(hs, seq, ok)
	for i, h := range hs {
		if !ok[i] {
			seq[i], ok[i] = t.get(h)
		}
	}
}

// lookupNumbers returns, for each key it knows, the message's number:
// from the cache or from the ledger's tail. seq[i] is set for the
// positions in known; unknown positions must be read through
// message_key_index.
func (s *Store) lookupNumbers(keys []store.StateKey, seq []int64) (known, unknown []int) {
	hs := make([]msgHash, len(keys))
	for i, k := range keys {
		hs[i] = s.numbers.hash(k)
	}
	found := make([]bool, len(keys))
	committedNumbers(s.numbers, s.tail, hs, seq, found)
	for i := range keys {
		if found[i] {
			known = append(known, i)
		} else {
			unknown = append(unknown, i)
		}
	}
	return known, unknown
}

// numbered keeps of unknown (indexes into keys that lookupNumbers found
// neither in the cache nor in the tail) those that may have a number: the
// index's filter drops the rest, unless the ledger holds a number beyond
// the tail's last (another process numbered messages this store has not
// caught up with). Such a message has no rows, so a read need not look
// for it: most messages the receipt pipeline reads first are new ones.
// A number the writer committed (or caught up with) after lookupNumbers
// looked may pass the check without having been seen: the answer for its
// message is then the one from before that commit, which a read
// overlapping the commit may give.
func (s *Store) numbered(ctx context.Context, keys []store.StateKey, unknown []int) ([]int, error) {
	if len(unknown) == 0 || !s.filter.usable() {
		return unknown, nil
	}
	var hi int64
	if err := s.rqueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM message_keys`).Scan(&hi); err != nil {
		return nil, fmt.Errorf("sqlite: read message keys: %w", wrapErr(err))
	}
	if _, last := s.tail.bounds(); hi > last {
		return unknown, nil
	}
	rest := unknown[:0]
	for _, j := range unknown {
		if !s.filter.absent(s.numbers.hash(keys[j])) {
			rest = append(rest, j)
		}
	}
	return rest, nil
}

// loadKeyTail reads the index's bound and the ledger's tail above it,
// before the writer starts.
func (s *Store) loadKeyTail(ctx context.Context) error {
	var upto int64
	if err := s.wconn.QueryRowContext(ctx, `SELECT upto FROM message_key_index_state WHERE id = 1`).Scan(&upto); err != nil {
		return fmt.Errorf("sqlite: read message key index state: %w", wrapErr(err))
	}
	s.tail.mu.Lock()
	s.tail.upto, s.tail.last = upto, upto
	s.tail.mu.Unlock()
	rows, err := s.wconn.QueryContext(ctx, catchUpSQL, upto)
	if err != nil {
		return fmt.Errorf("sqlite: read message keys: %w", wrapErr(err))
	}
	ks, err := scanKeyNumbers(rows, s.numbers)
	if err != nil {
		return err
	}
	s.tail.add(ks)
	return nil
}

const catchUpSQL = `SELECT seq, account_id, message_id FROM message_keys WHERE seq > ? ORDER BY seq`

// catchUp adds to the tail what another process appended to the ledger
// since this writer last knew it. It runs inside the writer's transaction
// (after BEGIN IMMEDIATE), so nobody appends meanwhile, and only when
// data_version shows that another connection committed (commitBatch):
// alone on the file, it would find nothing.
func (w *writeTx) catchUp() error {
	if err := w.catchUpFault; err != nil {
		w.catchUpFault = nil
		return err
	}
	t := w.seqs.tail
	_, last := t.bounds()
	rows, err := w.query(catchUpSQL, last)
	if err != nil {
		return fmt.Errorf("sqlite: read message keys: %w", wrapErr(err))
	}
	ks, err := scanKeyNumbers(rows, w.seqs.committed)
	if err != nil {
		return err
	}
	t.add(ks)
	return nil
}

// scanKeyNumbers reads (seq, account_id, message_id) rows, naming each
// message as the cache n does, and closes them.
func scanKeyNumbers(rows *sql.Rows, n *numbers) ([]keyNumber, error) {
	defer rows.Close()
	var ks []keyNumber
	var k store.StateKey
	var seq int64
	for rows.Next() {
		if err := rows.Scan(&seq, &k.AccountID, &k.MessageID); err != nil {
			return nil, fmt.Errorf("sqlite: read message keys: %w", err)
		}
		ks = append(ks, keyNumber{n.hash(k), k, seq})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read message keys: %w", wrapErr(err))
	}
	return ks, nil
}

// keyFill is a fill of the index in progress: the tail's numbers in
// (lo, hi], in key order, filed up to pos.
type keyFill struct {
	keys   []keyNumber
	pos    int
	lo, hi int64
}

// fileKeys files the ledger's tail in message_key_index once it holds
// Options.KeyIndexFill numbers: in key order, Options.keyFillChunk per
// call and transaction; the writer calls it after each batch. The
// transaction that files the last chunk checks that the fill held every
// ledger row of its range (else it files the range from the ledger
// itself), records the index's new bound, and then the tail forgets the
// filed numbers. A failure drops the fill, leaving the tail as it was
// (chunks filed already are filed again, ignored, next time); the next
// fill starts after another quarter of Options.KeyIndexFill numbers.
func (s *Store) fileKeys(w *writeTx) error {
	tail := w.seqs.tail
	if s.filling == nil {
		n := tail.len()
		fill := int(s.keyFill.Load())
		if n == 0 || n < fill || n < s.nextKeyFill {
			return nil
		}
		lo, hi := tail.bounds()
		s.filling = &keyFill{keys: tail.upTo(hi), lo: lo, hi: hi}
		s.nextKeyFill = n + max(fill/4, 1)
	}
	f := s.filling
	chunk := f.keys[f.pos:min(f.pos+s.opts.keyFillChunk, len(f.keys))]
	last := f.pos+len(chunk) == len(f.keys)
	err := func() error {
		if _, err := w.exec("BEGIN IMMEDIATE"); err != nil {
			return fmt.Errorf("sqlite: begin: %w", wrapErr(err))
		}
		for start := 0; start < len(chunk); start += maxKeyRows {
			part := chunk[start:min(start+maxKeyRows, len(chunk))]
			rows := padRows(len(part))
			args := w.argBuf(rows * 3)
			for i := 0; i < rows; i++ {
				// Padding copies are ignored as conflicts.
				k := &part[min(i, len(part)-1)]
				args = append(args, k.key.AccountID, k.key.MessageID, k.seq)
			}
			for i := range part {
				s.filter.add(part[i].h)
			}
			_, err := w.exec(multiInsert("INSERT OR IGNORE INTO message_key_index (account_id, message_id, seq) VALUES ", 3, rows, ""), args...)
			w.keepArgs(args)
			if err != nil {
				return fmt.Errorf("sqlite: file message keys: %w", wrapErr(err))
			}
		}
		if last {
			if err := w.checkFill(f); err != nil {
				return err
			}
			if _, err := w.exec(`UPDATE message_key_index_state SET upto = max(upto, ?) WHERE id = 1`, f.hi); err != nil {
				return fmt.Errorf("sqlite: file message keys: %w", wrapErr(err))
			}
		}
		if _, err := w.exec("COMMIT"); err != nil {
			return fmt.Errorf("sqlite: commit: %w", wrapErr(err))
		}
		return nil
	}()
	if err != nil {
		_, _ = w.conn.ExecContext(context.Background(), "ROLLBACK")
		s.filling = nil
		return err
	}
	f.pos += len(chunk)
	if last {
		tail.filed(f.hi)
		s.filling = nil
		s.nextKeyFill = 0
	}
	return nil
}

// checkFill makes sure the index holds every number of the fill's range
// before its bound moves past them: the tail should hold exactly the
// ledger rows of (lo, hi], and a number missing from both the tail and
// the index would be handed out a second time. Should the counts differ,
// the range is filed from the ledger itself.
func (w *writeTx) checkFill(f *keyFill) error {
	var n int
	if _, err := w.queryRow(`SELECT count(*) FROM message_keys WHERE seq > ? AND seq <= ?`, []any{f.lo, f.hi}, &n); err != nil {
		return fmt.Errorf("sqlite: file message keys: %w", wrapErr(err))
	}
	if n == len(f.keys) {
		return nil
	}
	// Messages the filter is not told about go into the index.
	w.seqs.filter.broken.Store(true)
	if _, err := w.exec(`INSERT OR IGNORE INTO message_key_index (account_id, message_id, seq)
		SELECT account_id, message_id, seq FROM message_keys WHERE seq > ? AND seq <= ?
		ORDER BY account_id, message_id`, f.lo, f.hi); err != nil {
		return fmt.Errorf("sqlite: file message keys: %w", wrapErr(err))
	}
	return nil
}
