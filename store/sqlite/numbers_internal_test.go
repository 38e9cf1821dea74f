package sqlite

import (
	"fmt"
	"testing"

	"github.com/wamux/wamux/store"
)

// get looks one name up (through getMany, which the store uses).
func (n *numbers) get(h msgHash) (int64, bool) {
	seq, ok := []int64{0}, []bool{false}
	n.getMany([]msgHash{h}, seq, ok)
	return seq[0], ok[0]
}

// The number cache answers exactly what was put, for every message it
// still holds; a shard keeps two generations, carries a number read from
// the older one into the newer, and drops the rest when it turns over.
func TestNumbersCache(t *testing.T) {
	n := newNumbers()
	key := func(i int) store.StateKey {
		return store.StateKey{AccountID: fmt.Sprintf("acc%d", i%3), MessageID: fmt.Sprintf("wamid.%d", i)}
	}
	// One shard's worth, filled to its bound: every number answers, and
	// none answers for a message never put.
	sh := &n.shards[0]
	var inShard []msgHash
	for i := 0; len(inShard) < numbersPerShard; i++ {
		h := n.hash(key(i))
		if n.shard(h) != sh {
			continue
		}
		if h[0] == 0 {
			t.Fatalf("message %d named with a zero first word, which marks a free slot", i)
		}
		inShard = append(inShard, h)
		n.put(h, int64(len(inShard)))
	}
	for i, h := range inShard {
		if v, ok := n.get(h); !ok || v != int64(i+1) {
			t.Fatalf("number %d: got %d, %v", i+1, v, ok)
		}
	}
	if v, ok := n.get(n.hash(store.StateKey{AccountID: "acc0", MessageID: "never"})); ok {
		t.Fatalf("a message never put has number %d", v)
	}
	// A put of a known message replaces its number, without a new slot.
	n.put(inShard[0], 1)
	if sh.cur.n != numbersPerShard || sh.prev.n != 0 {
		t.Fatalf("after the bound: cur %d, prev %d", sh.cur.n, sh.prev.n)
	}

	// The next new number turns the shard over: all stay readable (from
	// prev); reading one carries it into cur.
	extra := msgHash{1<<63 | 12345, uint64(numberShards) * 7} // shard 0
	n.put(extra, 999)
	if sh.prev.n != numbersPerShard || sh.cur.n != 1 {
		t.Fatalf("after turning over: cur %d, prev %d", sh.cur.n, sh.prev.n)
	}
	if v, ok := n.get(inShard[5]); !ok || v != 6 {
		t.Fatalf("number 6 after turning over: %d, %v", v, ok)
	}
	// Another full generation: only 6, read before, and the newest stay.
	for i := 0; sh.cur.n < numbersPerShard; i++ {
		n.put(msgHash{1<<63 | uint64(i+1)*0x9E3779B97F4A7C15, uint64(numberShards) * uint64(i+100)}, int64(-i))
	}
	n.put(msgHash{1<<63 | 77, uint64(numberShards) * 3}, 77) // turns over again
	if v, ok := n.get(inShard[5]); !ok || v != 6 {
		t.Fatalf("number 6, read in the last generation: %d, %v", v, ok)
	}
	if v, ok := n.get(inShard[7]); ok {
		t.Fatalf("number 8, not read for two generations, still held as %d", v)
	}
	if _, ok := n.get(extra); !ok {
		t.Fatal("the number put in the last generation is gone")
	}
	n.reset()
	if _, ok := n.get(inShard[5]); ok || n.len() != 0 {
		t.Fatalf("reset kept numbers: %d", n.len())
	}
}

// getMany answers for each name what get answers, whatever shards the
// names fall in and whichever generation holds them, and more names than
// its stack buffer takes.
func TestNumbersGetMany(t *testing.T) {
	n := newNumbers()
	var hs []msgHash
	want := map[int]int64{}
	for i := range 600 {
		h := n.hash(store.StateKey{AccountID: "acc", MessageID: fmt.Sprintf("wamid.%d", i)})
		hs = append(hs, h)
		if i%3 != 0 {
			n.put(h, int64(i+1))
			want[i] = int64(i + 1)
		}
	}
	// Turn shard 0 over so that its numbers are in prev.
	sh := &n.shards[0]
	for i := 0; sh.cur.n > 0 && sh.prev.n == 0; i++ {
		n.put(msgHash{1<<63 | uint64(i+1)*0x9E3779B97F4A7C15, uint64(numberShards) * uint64(i+1)}, -1)
	}
	for _, size := range []int{0, 1, 7, 256, 257, 600} {
		seq := make([]int64, size)
		ok := make([]bool, size)
		n.getMany(hs[:size], seq, ok)
		for i := range size {
			w, has := want[i]
			if ok[i] != has || seq[i] != w {
				t.Fatalf("%d names: name %d got %d, %v; want %d, %v", size, i, seq[i], ok[i], w, has)
			}
		}
	}
}
