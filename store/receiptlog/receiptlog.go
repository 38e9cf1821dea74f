// Package receiptlog is the layout both stores give the receipt pipeline's
// durable log (store.PipelineStore): one entry per append holding all of
// its receipts in a compact binary encoding (binary.go; entries of earlier
// versions are JSON and still read), and acknowledgements kept in memory.
//
// A row per receipt cost every receipt a row insert with eleven bound
// values and an index delete when it was acknowledged: about a fifth of
// SQLite's single writer under a receipt flood. An entry costs one row per
// append and one delete once all its receipts are acknowledged.
//
// A receipt's log id is its entry id << IndexBits | its position in the
// entry, so ids grow with every append and order the receipts as appended.
// Acknowledgements live in this process only: after a restart the entries
// still stored are read back whole, including receipts acknowledged before
// the crash. The pipeline then processes those again, which changes
// nothing (merging is idempotent and a receipt's unique key makes the
// second insert a no-op), so durability costs at most repeating the
// entries that were in flight.
package receiptlog

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

const (
	// IndexBits is the room for a receipt's position in a log id.
	IndexBits = 16
	// MaxEntry caps the receipts of one entry, within IndexBits.
	MaxEntry = 8192
)

// ID is the log id of the receipt at position i of entry.
func ID(entry int64, i int) int64 { return entry<<IndexBits | int64(i) }

// Split is ID's inverse.
func Split(id int64) (entry int64, i int) {
	return id >> IndexBits, int(id & (1<<IndexBits - 1))
}

// Chunks splits rs into the receipt slices of successive entries.
func Chunks(rs []wamux.Receipt) [][]wamux.Receipt {
	var out [][]wamux.Receipt
	for start := 0; start < len(rs); start += MaxEntry {
		out = append(out, rs[start:min(start+MaxEntry, len(rs))])
	}
	return out
}

// Acks tracks the acknowledgements of the entries this process has seen.
// It is safe for concurrent use.
type Acks struct {
	mu      sync.Mutex
	entries map[int64]*entryAcks
	// undeleted are fully acknowledged entries whose delete failed; the
	// next acknowledgement tries again.
	undeleted []int64
}

// NewAcks returns an empty tracker.
func NewAcks() *Acks { return &Acks{entries: map[int64]*entryAcks{}} }

// entryAcks is one entry's acknowledgement state.
type entryAcks struct {
	size  int
	acked []uint64 // bit i: receipt i is acknowledged
	left  int      // receipts not yet acknowledged
}

func newEntryAcks(size int) *entryAcks {
	return &entryAcks{size: size, acked: make([]uint64, (size+63)/64), left: size}
}

func (e *entryAcks) isAcked(i int) bool { return e.acked[i/64]&(1<<(i%64)) != 0 }

// Register records a new entry of size receipts. Stores call it inside the
// append's transaction, before the commit, so that a reader listing the
// entry the moment it is committed finds it here when its receipts are
// acknowledged; nobody holds an id of it before then, so an entry left by
// a rolled-back append whose id is reused is simply replaced.
func (a *Acks) Register(entry int64, size int) {
	a.mu.Lock()
	a.entries[entry] = newEntryAcks(size)
	a.mu.Unlock()
}

// Forget drops the registrations of an append that failed, unless one of
// them was marked meanwhile (Mark rebuilds an unknown entry from the store).
func (a *Acks) Forget(entries []int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, entry := range entries {
		if e, ok := a.entries[entry]; ok && e.left == e.size {
			delete(a.entries, entry)
		}
	}
}

// Acked reports whether the receipt with log id id is acknowledged.
func (a *Acks) Acked(id int64) bool {
	entry, i := Split(id)
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.entries[entry]
	return ok && i < e.size && e.isAcked(i)
}

// Mark acknowledges ids and returns how many were not acknowledged before
// (ids of unknown entries or past an entry's size count for nothing) and
// the entries to delete now: those it completed, and those whose delete
// failed before. size answers for an entry this process has not seen (it
// was appended before the start): its receipt count, or false if the entry
// is not stored. A mark needs no write: the pipeline acknowledges only
// what it has durably processed, and the delete is garbage collection.
//
// Unknown entries are looked up before anything is marked, so a failing
// size marks nothing: the caller counts an acknowledgement as all or
// nothing (it reads the receipts back and acknowledges them again), and a
// receipt marked but not counted would never be listed again.
func (a *Acks) Mark(ids []int64, size func(entry int64) (int, bool, error)) (marked int, done []int64, err error) {
	for _, id := range ids {
		entry, _ := Split(id)
		a.mu.Lock()
		_, known := a.entries[entry]
		a.mu.Unlock()
		if known {
			continue
		}
		n, found, err := size(entry)
		if err != nil {
			return 0, nil, err
		}
		if found {
			a.mu.Lock()
			if _, known = a.entries[entry]; !known {
				a.entries[entry] = newEntryAcks(n)
			}
			a.mu.Unlock()
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range ids {
		entry, i := Split(id)
		e, ok := a.entries[entry]
		if !ok || i >= e.size || e.isAcked(i) {
			continue
		}
		e.acked[i/64] |= 1 << (i % 64)
		e.left--
		marked++
		if e.left == 0 {
			done = append(done, entry)
		}
	}
	done = append(done, a.undeleted...)
	a.undeleted = nil
	return marked, done, nil
}

// Ack is an acknowledgement as the stores make it: Mark, then delete the
// entries that are done with del. Once marked, an acknowledgement stands
// even if the delete fails (Deleted keeps the entries for the next call;
// after a crash they are read back and processed again, harmlessly), so
// the count comes back without an error: the receipts are done.
func (a *Acks) Ack(ids []int64, size func(entry int64) (int, bool, error), del func(entries []int64) error) (int, error) {
	marked, done, err := a.Mark(ids, size)
	if err != nil || len(done) == 0 {
		return marked, err
	}
	a.Deleted(done, del(done))
	return marked, nil
}

// Deleted reports the outcome of deleting entries returned by Mark: on
// success they are forgotten, on failure the next Mark returns them again.
func (a *Acks) Deleted(entries []int64, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.undeleted = append(a.undeleted, entries...)
		return
	}
	for _, entry := range entries {
		delete(a.entries, entry)
	}
}

// Append is one append in the making: its entries, encoded before the
// store's transaction so that the writer only binds them.
type Append struct {
	acks       *Acks
	chunks     [][]wamux.Receipt
	datas      [][]byte
	ids        []int64
	registered []int64
}

// NewAppend splits rs into entries and encodes them; now stamps receipts
// without ReceivedAt (Unix ms).
func (a *Acks) NewAppend(rs []wamux.Receipt, now int64) *Append {
	ap := &Append{acks: a, chunks: Chunks(rs), ids: make([]int64, 0, len(rs))}
	for _, c := range ap.chunks {
		ap.datas = append(ap.datas, Encode(c, now))
	}
	return ap
}

// Insert stores the entries with insert (one row: its receipt count and
// data; it returns the entry id) and registers them. Call it inside the
// store's transaction, before the commit; a transaction that is retried
// may call it again, which first forgets the previous attempt's entries.
func (ap *Append) Insert(insert func(receipts int, data []byte) (entry int64, err error)) error {
	ap.acks.Forget(ap.registered)
	ap.ids, ap.registered = ap.ids[:0], ap.registered[:0]
	for k, data := range ap.datas {
		entry, err := insert(len(ap.chunks[k]), data)
		if err != nil {
			return err
		}
		for i := range ap.chunks[k] {
			ap.ids = append(ap.ids, ID(entry, i))
		}
		ap.acks.Register(entry, len(ap.chunks[k]))
		ap.registered = append(ap.registered, entry)
	}
	return nil
}

// Done ends the append with the transaction's outcome: the receipts' log
// ids, or the error once the entries are forgotten.
func (ap *Append) Done(err error) ([]int64, error) {
	if err != nil {
		ap.acks.Forget(ap.registered)
		return nil, err
	}
	return ap.ids, nil
}

// Stored is an entry as a store reads it back.
type Stored struct {
	ID   int64
	Data []byte
}

// List returns up to limit receipts with log ids above afterID that are
// not acknowledged, in id order. page reads stored entries with ids of at
// least from, in id order, a page at a time (none when there are no more).
// An entry that does not decode is handed to bad, which must take it out
// of the log (dead-letter and delete it), and skipped: left in place it
// would fail every read that reaches it, and with it the pipeline's
// recovery and read-back, for good. Without bad, List fails on it.
func (a *Acks) List(afterID int64, limit int, page func(from int64) ([]Stored, error), bad func(e Stored, err error) error) ([]store.LoggedReceipt, error) {
	from, _ := Split(max(afterID, 0))
	var out []store.LoggedReceipt
	for len(out) < limit {
		entries, err := page(from)
		if err != nil {
			return nil, err
		}
		if len(entries) == 0 {
			break
		}
		for _, e := range entries {
			rs, err := Decode(e.Data)
			if err != nil {
				err = fmt.Errorf("receipt log entry %d: %w", e.ID, err)
				if bad == nil {
					return nil, err
				}
				if err := bad(e, err); err != nil {
					return nil, err
				}
				a.Deleted([]int64{e.ID}, nil)
				continue
			}
			for i := range rs {
				if id := ID(e.ID, i); id > afterID && len(out) < limit && !a.Acked(id) {
					out = append(out, store.LoggedReceipt{ID: id, Receipt: rs[i]})
				}
			}
		}
		from = entries[len(entries)-1].ID + 1
	}
	return out, nil
}

// BadEntry is the dead letter that keeps an entry List could not decode.
func BadEntry(e Stored, err error) store.DeadLetter {
	payload, _ := json.Marshal(struct {
		Entry int64  `json:"entry"`
		Data  []byte `json:"data"`
	}{e.ID, e.Data})
	return store.DeadLetter{Source: "receipt_log", Reason: "undecodable receipt log entry: " + err.Error(), Payload: payload}
}

// PageSize is how many entries a page of List should hold.
const PageSize = 64

func unixMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromUnixMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}
