package sqlite

import (
	"sync"
	"sync/atomic"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// The state cache is a ring of slots indexed by message number: number
// n lives in slot n mod the ring's size, a power of two at least
// Options.StateCache, so the newest numbers are held and a number goes
// when another takes its slot: one a ring later, or a write for one a
// ring older (the most recently written wins). Message numbers are handed
// out in the order messages are first seen, and a message's receipts
// come within hours of each other, so the newest numbers are the ones in
// use; and since receipts arrive roughly in sending order, consecutive
// lookups touch neighbouring slots, which the CPU's caches and
// prefetcher serve, where a hash map scatters them. A slot is 32 bytes; the ring is allocated in
// chunks of stateChunk slots as numbers reach them, so a small store
// stays small: 32 MiB once the default 1 Mi slots are all in use.
// Slots are guarded by stateLocks mutexes striped by number, so that
// neighbouring numbers, which the writer and the readers often use
// together, do not share one.
const (
	stateChunk = 4096
	stateLocks = 16
)

// stateCache holds, by message number, what this store's writer
// committed to a message's rows of message_receipts: its merged state and,
// for messages the writer numbered itself, which receipt rows exist. Then
// GetStates and HasReceipts answer the receipt pipeline without a read
// transaction. Reads are what make it worth having: SQLite empties a
// reader connection's page cache whenever the WAL changed since its last
// transaction, which under a steady writer is every time, so each state
// read or Bloom confirmation would fetch its b-tree pages again.
//
// An entry holds exactly what the rows hold: only committed writes go in
// (the writer files a transaction's after its COMMIT and before it
// answers the requests, so a caller that sees a write return finds it
// here), in the store's own precision (milliseconds), so a hit returns
// what a read would. An entry is complete when the writer created it on
// numbering the message (a new number has no rows yet) and has seen every
// write to the message since: then a missing state or receipt bit means
// the row does not exist. Readers never add to it: a state they read may
// already be older than one the writer is filing, and states, unlike
// message numbers, change. Nothing deletes from message_receipts; a
// retention job that does must reset the cache, or a Bloom hit could be
// confirmed by a receipt no longer stored.
//
// What complete entries know also saves the state rows themselves: a
// state that InsertReceiptsPutStates stores together with the receipt it
// is, for a message with a complete entry and no state row, and above
// the state before, is kept as that receipt row's apply time (migration
// 0110) instead of a state row, and a read derives it
// (pendingStates.derivable; GetStates). Otherwise a state row is written,
// and it wins from then on.
//
// Another process writing the same file is noticed by the writer at the
// start of its next transaction (PRAGMA data_version changes only for
// commits of other connections, and the writer is this process's only
// writing connection), which then forgets every entry. Until then a
// reader may be answered from here with a state the other process has
// since replaced. The receipt pipeline never relies on more: one account
// is merged by one processor at a time (DESIGN), and even without the
// cache its read and its write of a state are separate transactions.
//
// stateCache is safe for concurrent use.
type stateCache struct {
	mask   uint64 // slots - 1
	locks  [stateLocks]sync.Mutex
	chunks []atomic.Pointer[[stateChunk]stateSlot]
}

// stateSlot is one slot of the ring: the message numbered seq (0: none;
// numbers start at 1) and what the cache knows of it.
type stateSlot struct {
	seq int64
	st  cachedState
}

// cachedState is what the cache knows of one message's rows: its state
// row's columns as stored, the type as an index into stateTypes (0: no
// state row known), and, when complete, its receipt rows (receiptBit(i):
// a receipt of type stateTypes[i]; callbackBit(i): that receipt carries
// callback data). Both sets share one byte, so that the slot stays 32
// bytes.
type cachedState struct {
	event, stamp int64
	code         int32
	typ          uint8
	receipts     uint8
	complete     bool
	// stateRow: the message has a state row (entry ''); a complete entry
	// without one has its state derived from its applied receipt rows.
	stateRow bool
}

// derivable reports whether a state applied to this message may go
// without a state row: the entry knows every row and none is one.
func (c cachedState) derivable() bool { return c.complete && !c.stateRow }

// hasReceipt answers whether the message has a receipt row of type t
// (that carries callback data, when callback), when the entry knows
// (complete).
func (c cachedState) hasReceipt(t wamux.ReceiptType, callback bool) (has, known bool) {
	if !c.complete {
		return false, false
	}
	i := stateTypeIndex(t)
	if i == 0 {
		return false, true
	}
	bit := receiptBit(i)
	if callback {
		bit = callbackBit(i)
	}
	return c.receipts&bit != 0, true
}

// receiptBit and callbackBit are the bits of cachedState.receipts for
// type index i (1 to 4): its receipt row, and its callback data.
func receiptBit(i uint8) uint8  { return 1 << (i - 1) }
func callbackBit(i uint8) uint8 { return 1 << (i + 3) }

// stateTypes are the types a cached state may have; a state of any other
// type is not cached (its message reads from the table).
var stateTypes = [...]wamux.ReceiptType{1: wamux.ReceiptSent, 2: wamux.ReceiptDelivered, 3: wamux.ReceiptRead, 4: wamux.ReceiptFailed}

// stateTypeIndex is t's index in stateTypes, or 0 when it has none.
func stateTypeIndex(t wamux.ReceiptType) uint8 {
	for i := 1; i < len(stateTypes); i++ {
		if stateTypes[i] == t {
			return uint8(i)
		}
	}
	return 0
}

// cacheable is the cache's copy of the state row st makes, stamped
// updated; its typ is 0 (not to be cached) when a column would not fit.
func cacheable(st *store.MessageState, updated int64) cachedState {
	c := cachedState{event: ms(st.EventTime), stamp: updated, code: int32(st.ErrorCode), typ: stateTypeIndex(st.Type)}
	if int(c.code) != st.ErrorCode {
		c.typ = 0
	}
	return c
}

// newStateCache returns a cache that holds at least the messages newest
// numbers.
func newStateCache(messages int) *stateCache {
	slots := uint64(stateChunk)
	for slots < uint64(messages) {
		slots <<= 1
	}
	return &stateCache{mask: slots - 1, chunks: make([]atomic.Pointer[[stateChunk]stateSlot], slots/stateChunk)}
}

// slot returns the slot of number seq and the mutex guarding it; when its
// chunk was never written, nil, unless create.
func (c *stateCache) slot(seq int64, create bool) (*stateSlot, *sync.Mutex) {
	i := uint64(seq) & c.mask
	mu := &c.locks[uint64(seq)%stateLocks]
	ch := &c.chunks[i/stateChunk]
	p := ch.Load()
	if p == nil {
		if !create {
			return nil, mu
		}
		ch.CompareAndSwap(nil, new([stateChunk]stateSlot))
		p = ch.Load()
	}
	return &p[i%stateChunk], mu
}

// get returns the committed state of the message numbered seq, if held.
func (c *stateCache) get(seq int64) (cachedState, bool) {
	sl, mu := c.slot(seq, false)
	if sl == nil {
		return cachedState{}, false
	}
	mu.Lock()
	defer mu.Unlock()
	if sl.seq != seq || seq == 0 {
		return cachedState{}, false
	}
	return sl.st, true
}

// apply files one committed write.
func (c *stateCache) apply(op cacheOp) {
	sl, mu := c.slot(op.seq, true)
	mu.Lock()
	defer mu.Unlock()
	e, ok := sl.st, sl.seq == op.seq
	if !ok {
		e = cachedState{}
	}
	switch op.kind {
	case opNumbered:
		e, ok = cachedState{complete: true}, true
	case opState, opDerived:
		if op.row.typ == 0 {
			// A state the entry cannot hold: no older one may stay.
			if sl.seq == op.seq {
				*sl = stateSlot{}
			}
			return
		}
		e.event, e.stamp, e.code, e.typ = op.row.event, op.row.stamp, op.row.code, op.row.typ
		if op.kind == opState {
			e.stateRow = true
		}
		ok = true
	case opReceipt:
		if !ok || !e.complete {
			return
		}
		if op.row.typ == 0 {
			e.complete = false // a receipt type without a bit
		} else {
			e.receipts |= op.row.receipts
		}
	}
	if ok {
		*sl = stateSlot{seq: op.seq, st: e}
	}
}

// forget drops the message numbered seq (a state whose transaction
// failed: whether it was committed is not known).
func (c *stateCache) forget(seq int64) {
	sl, mu := c.slot(seq, false)
	if sl == nil {
		return
	}
	mu.Lock()
	if sl.seq == seq {
		*sl = stateSlot{}
	}
	mu.Unlock()
}

// reset forgets every state. The chunks go too: the memory of a ring
// that filled once is given back until numbers reach it again.
func (c *stateCache) reset() {
	for i := range c.locks {
		c.locks[i].Lock()
	}
	for i := range c.chunks {
		c.chunks[i].Store(nil)
	}
	for i := range c.locks {
		c.locks[i].Unlock()
	}
}

// cacheOp is one write of a request, not yet committed: a message
// numbered, a state row written, a state applied as one of its receipt
// rows (derived), a receipt row stored (row.typ its type, row.receipts
// the bits it sets).
type cacheOp struct {
	seq  int64
	kind uint8
	row  cachedState
}

const (
	opNumbered = iota
	opState
	opDerived
	opReceipt
)

// pendingStates are the cache's writes inside the writer's open
// transaction: those of the request running (req) and of the requests
// before it that succeeded (tx). Like seqs, they reach the cache only
// once COMMIT succeeded.
type pendingStates struct {
	cache   *stateCache
	req, tx []cacheOp
	// marks[seq] tell what the transaction did to a message so far
	// (markNumbered, markRow); reqMarks those of the running request.
	marks, reqMarks map[int64]uint8
}

const (
	markNumbered = 1 << iota
	markRow
	markDerived
)

func (p *pendingStates) mark(seq int64, m uint8) {
	if p.reqMarks == nil {
		p.reqMarks = map[int64]uint8{}
	}
	p.reqMarks[seq] |= m
}

// numbered notes a message the writer numbered, so with no rows yet.
func (p *pendingStates) numbered(seq int64) {
	p.req = append(p.req, cacheOp{seq: seq, kind: opNumbered})
	p.mark(seq, markNumbered)
}

// state notes a state row written.
func (p *pendingStates) state(seq int64, row cachedState) {
	p.req = append(p.req, cacheOp{seq: seq, kind: opState, row: row})
	p.mark(seq, markRow)
}

// derived notes a state applied as one of the message's receipt rows,
// with no state row written.
func (p *pendingStates) derived(seq int64, row cachedState) {
	p.req = append(p.req, cacheOp{seq: seq, kind: opDerived, row: row})
	p.mark(seq, markDerived)
}

// derivable reports whether next, a new state of the message numbered
// seq, may be derived from its receipt rows (no state row written): the
// message has no state row and every row it has is known, because it was
// numbered in this transaction or the cache's entry is complete, and
// next is above its state, so that the greatest applied receipt is next.
// The cache lags this transaction's writes, so their marks come first:
// a message given a state row or a derived state in this transaction
// takes rows from then on.
func (p *pendingStates) derivable(seq int64, next cachedState) bool {
	m := p.marks[seq] | p.reqMarks[seq]
	if m&(markRow|markDerived) != 0 {
		return false
	}
	if m&markNumbered != 0 {
		return true
	}
	c, ok := p.cache.get(seq)
	return ok && c.derivable() && (c.typ == 0 || next.above(c))
}

// above orders cached states as the merge does (mergeAbove).
func (c cachedState) above(d cachedState) bool {
	return mergeAbove(stateTypes[c.typ], stateTypes[d.typ], c.event, d.event, int(c.code), int(d.code))
}

// mergeAbove reports whether a state (type ta, event time ea in ms, error
// code ca) is above another in the order the merge keeps
// (receipts.Merge): stronger type, then later event time, then larger
// error code.
func mergeAbove(ta, tb wamux.ReceiptType, ea, eb int64, ca, cb int) bool {
	if va, vb := ta.Version(), tb.Version(); va != vb {
		return va > vb
	}
	if ea != eb {
		return ea > eb
	}
	return ca > cb
}

// receipt notes a receipt row of type t stored (new or not), and whether
// it carries callback data (only a new row can: a repeat leaves the row as
// it was).
func (p *pendingStates) receipt(seq int64, t wamux.ReceiptType, callback bool) {
	row := cachedState{typ: stateTypeIndex(t)}
	if row.typ != 0 {
		row.receipts = receiptBit(row.typ)
		if callback {
			row.receipts |= callbackBit(row.typ)
		}
	}
	p.req = append(p.req, cacheOp{seq: seq, kind: opReceipt, row: row})
}

// requestDone keeps a request's writes for the transaction, or drops them
// when the request was rolled back to its savepoint.
func (p *pendingStates) requestDone(ok bool) {
	if ok {
		p.tx = append(p.tx, p.req...)
		if len(p.reqMarks) > 0 && p.marks == nil {
			p.marks = map[int64]uint8{}
		}
		for seq, m := range p.reqMarks {
			p.marks[seq] |= m
		}
	}
	p.req = p.req[:0]
	clear(p.reqMarks)
}

// txDone files the transaction's writes in order, or, when the
// transaction failed, forgets the messages they name: a failed COMMIT may
// have been durable after all.
func (p *pendingStates) txDone(committed bool) {
	p.requestDone(committed)
	for _, op := range p.tx {
		if committed {
			p.cache.apply(op)
		} else {
			p.cache.forget(op.seq)
		}
	}
	p.tx = p.tx[:0]
	clear(p.marks)
}
