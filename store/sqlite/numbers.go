package sqlite

import (
	"hash/maphash"
	"sync"

	"github.com/wamux/wamux/store"
)

// numbersPerShard is how many message numbers one generation of one shard
// of the number cache holds. With the previous generation and 16 shards
// the cache keeps up to 1 Mi numbers (a 16-byte key and an 8-byte value
// each, in maps sized for a full generation): about 53 MiB once both
// generations have filled (measured: 53.3 MiB holding 717 Ki numbers),
// enough for every message a receipt flood of a few minutes touches.
// Right after a shard turns over it holds only one generation, so the
// cache is sure to hold the last 512 Ki; at 16 Ki a shard (256 Ki sure),
// 12 % of the state reads of bench receipts' 307 Ki messages missed it
// and looked the message up in message_key_index, on a reader or on the
// writer: 32 Ki ran 4 % faster on average (13 alternating pairs) with
// 6 % less CPU per receipt (docs/BENCHMARKS.md, thirteenth session). It matches the state cache
// (StateCacheDefault), whose entries are found by number.
const (
	numberShards    = 16
	numbersPerShard = 32 << 10
)

// msgHash names a message (account id, provider id) in the number cache:
// two 64-bit hashes under independent random seeds. Keeping 16 bytes
// instead of both strings is what lets the cache hold half a million
// messages in under 30 MiB (the string keys took about 120 bytes each).
// Two messages share a name with a probability of about n²/2¹²⁹, about
// 10⁻²⁷ for a million messages; the seeds are drawn per process, so
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
// a new cur starts; a number found in prev is carried into cur, so what is
// in use survives and what is not ages out.
type numberShard struct {
	mu        sync.Mutex
	cur, prev map[msgHash]int64
}

func newNumbers() *numbers {
	n := &numbers{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
	for i := range n.shards {
		n.shards[i].cur = map[msgHash]int64{}
	}
	return n
}

// hash names the message k.
func (n *numbers) hash(k store.StateKey) msgHash {
	return msgHash{maphash.Comparable(n.seeds[0], k), maphash.Comparable(n.seeds[1], k)}
}

func (n *numbers) shard(h msgHash) *numberShard { return &n.shards[h[1]%numberShards] }

// get returns the number of the message named h, if the cache holds it.
func (n *numbers) get(h msgHash) (int64, bool) {
	sh := n.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if v, ok := sh.cur[h]; ok {
		return v, true
	}
	if v, ok := sh.prev[h]; ok {
		sh.putLocked(h, v)
		return v, true
	}
	return 0, false
}

// put files the committed number v of the message named h.
func (n *numbers) put(h msgHash, v int64) {
	sh := n.shard(h)
	sh.mu.Lock()
	sh.putLocked(h, v)
	sh.mu.Unlock()
}

func (sh *numberShard) putLocked(h msgHash, v int64) {
	if len(sh.cur) >= numbersPerShard {
		sh.prev, sh.cur = sh.cur, make(map[msgHash]int64, numbersPerShard)
	}
	sh.cur[h] = v
}

// reset forgets every number (a job that deletes from message_keys must
// call it; tests use it to read through the tail or the index again).
func (n *numbers) reset() {
	for i := range n.shards {
		sh := &n.shards[i]
		sh.mu.Lock()
		sh.cur, sh.prev = map[msgHash]int64{}, nil
		sh.mu.Unlock()
	}
}
