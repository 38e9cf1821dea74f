package sqlite

import (
	"hash/maphash"
	"sync"

	"github.com/wamux/wamux/store"
)

// numbersPerShard is how many message numbers one generation of one shard
// of the number cache holds. With the previous generation and 16 shards
// the cache keeps up to 1 Mi numbers (24-byte slots, twice as many as
// numbers): 48 MiB once both generations of every shard are in use,
// enough for every message a receipt flood of a few minutes touches.
// Right after a shard turns over it holds only one generation, so the
// cache is sure to hold the last 512 Ki; a miss costs a lookup in
// message_key_index. It matches the state cache (StateCacheDefault), whose
// entries are found by number.
const (
	numberShards    = 16
	numbersPerShard = 32 << 10
)

// msgHash names a message (account id, provider id) in the number cache:
// two 64-bit hashes under independent random seeds, the first with its
// top bit set (so that no name is all zeros, which marks a free slot).
// Keeping 16 bytes instead of both strings (about 120 bytes) is what lets
// the cache hold a million messages in 48 MiB.
// Two messages share a name with a probability of about n²/2¹²⁸, about
// 3 × 10⁻²⁷ for a million messages; the seeds are drawn per process, so
// nobody outside can aim for a collision.
type msgHash [2]uint64

// numbers remembers committed message numbers (message_keys.seq,
// migrations 0090 and 0100) for the writer and the readers alike. A
// number never changes once committed (nothing deletes from message_keys;
// a retention job that does must clear this cache), so an entry stays
// true even when another process writes the same file; the cache is never
// the only place a number is known, and a miss just costs a look at the
// ledger's tail (keyindex.go) and then a lookup in message_key_index.
//
// Only committed numbers go in: the writer files what a transaction
// learned after its COMMIT (seqs.txDone), readers what they read (readers
// see committed data only).
//
// numbers is safe for concurrent use.
type numbers struct {
	seeds  [2]maphash.Seed
	shards [numberShards]numberShard
}

// numberShard holds two generations: when cur is full it becomes prev and
// a new cur starts (in the memory of the old prev); a number found in
// prev is carried into cur, so what is in use survives and what is not
// ages out.
type numberShard struct {
	mu        sync.Mutex
	cur, prev numberTable
}

// numberTable is an open-addressing hash table with linear probing, of
// twice as many slots as it may hold numbers. A slot is the message's
// whole name and its number, 24 bytes, so a lookup mostly reads one cache
// line, and a full table is one allocation that a turnover reuses. The
// cost of a lookup is the memory read; looking a batch up under one lock
// (numbers.getMany) lets those reads overlap.
type numberTable struct {
	slots []numberSlot // nil until the first put
	n     int
}

// numberSlot holds the number of the message named h; h[0] is never 0 in
// a used slot (numbers.hash), so an all-zero slot is free.
type numberSlot struct {
	h   msgHash
	seq int64
}

func newNumbers() *numbers {
	return &numbers{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
}

// hash names the message k. h[0] is never 0: a free slot is all zeros.
func (n *numbers) hash(k store.StateKey) msgHash {
	return msgHash{maphash.Comparable(n.seeds[0], k) | 1<<63, maphash.Comparable(n.seeds[1], k)}
}

func (n *numbers) shard(h msgHash) *numberShard { return &n.shards[h[1]%numberShards] }

// getMany looks every name of hs up: seq[i] and ok[i] (the number of
// the message named hs[i], if the cache holds it) for hs[i]. A number
// found in the older generation is carried into the newer. It takes each
// shard's lock once for all of the shard's names. Besides saving locks, that lets the CPU overlap the lookups' memory
// reads, which are mostly misses in a table of tens of MiB: a lock per
// lookup, an atomic instruction and so a barrier, waits each one out.
func (n *numbers) getMany(hs []msgHash, seq []int64, ok []bool) {
	var buf [256]int32
	order := buf[:0]
	if len(hs) > len(buf) {
		order = make([]int32, 0, len(hs))
	}
	order = order[:len(hs)]
	var start [numberShards + 1]int32
	for _, h := range hs {
		start[h[1]%numberShards+1]++
	}
	for i := 1; i <= numberShards; i++ {
		start[i] += start[i-1]
	}
	next := start
	for i, h := range hs {
		sh := h[1] % numberShards
		order[next[sh]] = int32(i)
		next[sh]++
	}
	for s := range numberShards {
		part := order[start[s]:start[s+1]]
		if len(part) == 0 {
			continue
		}
		sh := &n.shards[s]
		sh.mu.Lock()
		for _, i := range part {
			seq[i], ok[i] = sh.cur.get(hs[i])
		}
		for _, i := range part {
			if !ok[i] {
				if seq[i], ok[i] = sh.prev.get(hs[i]); ok[i] {
					sh.putLocked(hs[i], seq[i])
				}
			}
		}
		sh.mu.Unlock()
	}
}

// put files the committed number v of the message named h.
func (n *numbers) put(h msgHash, v int64) {
	sh := n.shard(h)
	sh.mu.Lock()
	sh.putLocked(h, v)
	sh.mu.Unlock()
}

func (sh *numberShard) putLocked(h msgHash, v int64) {
	if sh.cur.n >= numbersPerShard && !sh.cur.has(h) {
		old := sh.prev.slots
		clear(old)
		sh.prev, sh.cur = sh.cur, numberTable{slots: old}
	}
	sh.cur.put(h, v)
}

// get returns the number filed under h.
func (t *numberTable) get(h msgHash) (int64, bool) {
	if t.slots == nil {
		return 0, false
	}
	mask := uint64(len(t.slots) - 1)
	for i := h[0] & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.h == h {
			return s.seq, true
		}
		if s.h[0] == 0 {
			return 0, false
		}
	}
}

func (t *numberTable) has(h msgHash) bool {
	_, ok := t.get(h)
	return ok
}

// put files v under h; the table holds at most numbersPerShard numbers,
// in 2 × numbersPerShard slots, so a free slot always ends a probe.
func (t *numberTable) put(h msgHash, v int64) {
	if t.slots == nil {
		t.slots = make([]numberSlot, 2*numbersPerShard)
	}
	mask := uint64(len(t.slots) - 1)
	for i := h[0] & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.h == h {
			s.seq = v
			return
		}
		if s.h[0] == 0 {
			*s = numberSlot{h: h, seq: v}
			t.n++
			return
		}
	}
}

// reset forgets every number (a job that deletes from message_keys must
// call it; tests use it to read through the tail or the index again).
func (n *numbers) reset() {
	for i := range n.shards {
		sh := &n.shards[i]
		sh.mu.Lock()
		sh.cur, sh.prev = numberTable{}, numberTable{}
		sh.mu.Unlock()
	}
}
