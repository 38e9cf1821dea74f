package receipts

import "hash/maphash"

// idSet is one account's L1 cache: the last size receipt ids used, least
// recently used out first, each with whether a copy carrying callback data
// was among them. It is built for a receipt flood: the entries live in
// one slice linked by index (no node per id for the collector to trace,
// none to allocate), and an open-addressing table of entry indexes,
// probed by a 64-bit hash kept in each entry, finds them; the ids
// themselves are compared on a hash match, so the set stays exact.
//
// idSet is not safe for concurrent use; LRU guards each with its
// account's lock.
type idSet struct {
	seed  maphash.Seed
	ents  []idEntry // ents[0] is unused: index 0 means none
	table []int32   // entry index, 0 when free; a power of two, at most half full
	size  int
	// head is the most recently used entry, tail the least.
	head, tail int32
}

type idEntry struct {
	id ReceiptID
	// h is id's hash (its top bit always clear, see hash), or'd with
	// withCallback when a copy of id carrying callback data was added:
	// the flag takes no room of its own, so an entry stays 48 bytes.
	h          uint64
	prev, next int32 // towards head, towards tail
}

// withCallback marks an entry's h: a copy carrying callback data was seen.
const withCallback = 1 << 63

// hash is the entry's id hash, without the flag.
func (en *idEntry) hash() uint64 { return en.h &^ withCallback }

// newIDSet returns an empty set of up to size ids. It starts small and
// grows with its ids, so an account that sees few receipts costs little.
func newIDSet(size int) *idSet {
	return &idSet{seed: maphash.MakeSeed(), ents: make([]idEntry, 1, 8), table: make([]int32, 16), size: size}
}

// grow doubles the table (add calls it before a new entry would fill
// more than half of it).
func (s *idSet) grow() {
	s.table = make([]int32, 2*len(s.table))
	mask := len(s.table) - 1
	for e := 1; e < len(s.ents); e++ {
		i := int(s.ents[e].hash()) & mask
		for s.table[i] != 0 {
			i = (i + 1) & mask
		}
		s.table[i] = int32(e)
	}
}

// hash returns id's hash with the top bit clear, for withCallback.
func (s *idSet) hash(id ReceiptID) uint64 {
	return maphash.Comparable(s.seed, id) &^ withCallback
}

// find returns the table slot holding id, or the free slot that ends its
// probe and false.
func (s *idSet) find(id ReceiptID, h uint64) (slot int, found bool) {
	mask := len(s.table) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		e := s.table[i]
		if e == 0 {
			return i, false
		}
		if en := &s.ents[e]; en.hash() == h && en.id == id {
			return i, true
		}
	}
}

// get reports whether id is held, making it the most recent when it is;
// with callback, only whether a copy carrying callback data was added.
func (s *idSet) get(id ReceiptID, callback bool) bool {
	slot, ok := s.find(id, s.hash(id))
	if !ok {
		return false
	}
	e := s.table[slot]
	s.touch(e)
	return !callback || s.ents[e].h&withCallback != 0
}

// add records id as the most recent, evicting the least recent id when the
// set is full; callback records that the copy added carries callback data.
func (s *idSet) add(id ReceiptID, callback bool) {
	h := s.hash(id)
	var flag uint64
	if callback {
		flag = withCallback
	}
	slot, ok := s.find(id, h)
	if ok {
		e := s.table[slot]
		s.ents[e].h |= flag
		s.touch(e)
		return
	}
	var e int32
	if len(s.ents)-1 < s.size {
		if 2*(len(s.ents)+1) > len(s.table) {
			s.grow()
			slot, _ = s.find(id, h)
		}
		s.ents = append(s.ents, idEntry{})
		e = int32(len(s.ents) - 1)
	} else {
		e = s.tail
		s.unlink(e)
		s.remove(e)
		// The removal may have moved entries along id's probe.
		slot, _ = s.find(id, h)
	}
	s.ents[e] = idEntry{id: id, h: h | flag}
	s.table[slot] = e
	s.pushFront(e)
}

// touch makes entry e the most recent.
func (s *idSet) touch(e int32) {
	if s.head == e {
		return
	}
	s.unlink(e)
	s.pushFront(e)
}

func (s *idSet) pushFront(e int32) {
	en := &s.ents[e]
	en.prev, en.next = 0, s.head
	if s.head != 0 {
		s.ents[s.head].prev = e
	}
	s.head = e
	if s.tail == 0 {
		s.tail = e
	}
}

func (s *idSet) unlink(e int32) {
	en := &s.ents[e]
	if en.prev != 0 {
		s.ents[en.prev].next = en.next
	} else {
		s.head = en.next
	}
	if en.next != 0 {
		s.ents[en.next].prev = en.prev
	} else {
		s.tail = en.prev
	}
	en.prev, en.next = 0, 0
}

// remove takes entry e out of the table, shifting back the entries after
// it in its cluster that would no longer be found (linear probing leaves
// no tombstones this way).
func (s *idSet) remove(e int32) {
	mask := len(s.table) - 1
	i, _ := s.find(s.ents[e].id, s.ents[e].hash())
	s.table[i] = 0
	for j := (i + 1) & mask; s.table[j] != 0; j = (j + 1) & mask {
		home := int(s.ents[s.table[j]].hash()) & mask
		// The entry at j may fill the hole at i unless its home lies
		// cyclically in (i, j].
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			s.table[i], s.table[j] = s.table[j], 0
			i = j
		}
	}
	s.ents[e].id = ReceiptID{} // release the message id's string
}
