package sqlite

import (
	"sync"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// stateShards × 2 generations × statesPerShard bound the state cache at
// 512 Ki messages, as many as the number cache holds (numbers.go): about
// 20 MiB once full (an 8-byte key and a 24-byte value in maps sized for a
// full generation).
const (
	stateShards    = 16
	statesPerShard = 16 << 10
)

// stateCache holds the merged states this store's writer committed, by
// message number, so that GetStates answers the receipt pipeline without
// a read transaction. Reads are what make it worth having: SQLite empties
// a reader connection's page cache whenever the WAL changed since its
// last transaction, which under a steady writer is every time, so each
// state read fetched its b-tree pages again (a quarter of the pipeline's
// CPU in the profile of docs/BENCHMARKS.md, ninth session).
//
// An entry is exactly the row the writer committed: only committed states
// go in (the writer files a transaction's after its COMMIT and before it
// answers the requests, so a caller that sees PutStates return finds its
// states here), in the store's own precision (milliseconds), so a hit
// returns what a read of the row would. Readers never add to it: a state
// they read may already be older than one the writer is filing, and
// states, unlike message numbers, change.
//
// Another process writing the same file is noticed by the writer at the
// start of its next transaction (PRAGMA data_version changes only for
// commits of other connections, and the writer is this process's only
// writing connection), which then forgets every state. Until then a
// reader may be answered from here with a state the other process has
// since replaced. The receipt pipeline never relies on more: one account
// is merged by one processor at a time (DESIGN), and even without the
// cache its read and its write of a state are separate transactions.
//
// stateCache is safe for concurrent use.
type stateCache struct {
	shards [stateShards]stateShard
}

type stateShard struct {
	mu        sync.Mutex
	cur, prev map[int64]cachedState
}

// cachedState is one state row of message_receipts: its columns as
// stored, the type as an index into stateTypes.
type cachedState struct {
	event, stamp int64
	code         int32
	typ          uint8
}

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

func newStateCache() *stateCache {
	c := &stateCache{}
	for i := range c.shards {
		c.shards[i].cur = map[int64]cachedState{}
	}
	return c
}

func (c *stateCache) shard(seq int64) *stateShard { return &c.shards[uint64(seq)%stateShards] }

// get returns the committed state of the message numbered seq, if held.
func (c *stateCache) get(seq int64) (cachedState, bool) {
	sh := c.shard(seq)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if v, ok := sh.cur[seq]; ok {
		return v, true
	}
	if v, ok := sh.prev[seq]; ok {
		sh.putLocked(seq, v)
		return v, true
	}
	return cachedState{}, false
}

// put files a committed state; a state of a type outside stateTypes
// (typ 0) removes the message instead, so no older state stays behind.
func (c *stateCache) put(seq int64, v cachedState) {
	sh := c.shard(seq)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	delete(sh.prev, seq)
	if v.typ == 0 {
		delete(sh.cur, seq)
		return
	}
	sh.putLocked(seq, v)
}

func (sh *stateShard) putLocked(seq int64, v cachedState) {
	if _, ok := sh.cur[seq]; !ok && len(sh.cur) >= statesPerShard {
		sh.prev, sh.cur = sh.cur, make(map[int64]cachedState, statesPerShard)
	}
	sh.cur[seq] = v
}

// forget drops the message numbered seq (a state whose transaction
// failed: whether it was committed is not known).
func (c *stateCache) forget(seq int64) {
	sh := c.shard(seq)
	sh.mu.Lock()
	delete(sh.cur, seq)
	delete(sh.prev, seq)
	sh.mu.Unlock()
}

// reset forgets every state.
func (c *stateCache) reset() {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		sh.cur, sh.prev = map[int64]cachedState{}, nil
		sh.mu.Unlock()
	}
}

// stateWrite is a state row a write request wrote, not yet committed.
type stateWrite struct {
	seq int64
	row cachedState
}

// pendingStates are the state rows written inside the writer's open
// transaction: those of the request running (req) and of the requests
// before it that succeeded (tx). Like seqs, they reach the cache only
// once COMMIT succeeded.
type pendingStates struct {
	cache   *stateCache
	req, tx []stateWrite
}

func (p *pendingStates) add(seq int64, row cachedState) {
	p.req = append(p.req, stateWrite{seq, row})
}

// requestDone keeps a request's rows for the transaction, or drops them
// when the request was rolled back to its savepoint.
func (p *pendingStates) requestDone(ok bool) {
	if ok {
		p.tx = append(p.tx, p.req...)
	}
	p.req = p.req[:0]
}

// txDone files the transaction's rows in order (a later write of one
// message replaces an earlier), or, when the transaction failed, forgets
// the messages they name: a failed COMMIT may have been durable after all.
func (p *pendingStates) txDone(committed bool) {
	p.requestDone(committed)
	for _, w := range p.tx {
		if committed {
			p.cache.put(w.seq, w.row)
		} else {
			p.cache.forget(w.seq)
		}
	}
	p.tx = p.tx[:0]
}
