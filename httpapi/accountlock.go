package httpapi

import (
	"hash/fnv"
	"sync"
)

// accountLocks serialises the changes of one account (POST and PATCH
// /v1/accounts): each stores its change and then tells the send pipeline
// (accountChanged), and two of them interleaving could tell the pipeline
// in the other order than they were stored, leaving it on the older
// change while the store and GET show the newer one: an older rate, or a
// cooldown a rate-only PATCH read just before a state=active PATCH ended
// it, started again. Changes of different accounts may share a stripe;
// that only makes one wait for the other's store write.
type accountLocks struct {
	stripes [64]sync.Mutex
}

// accountLockWait, when set (tests), runs when a change must wait for
// another change of the same stripe to finish.
var accountLockWait func(id string)

// lock takes id's stripe and returns its unlock.
func (l *accountLocks) lock(id string) (unlock func()) {
	h := fnv.New32a()
	h.Write([]byte(id))
	m := &l.stripes[h.Sum32()%uint32(len(l.stripes))]
	if !m.TryLock() {
		if accountLockWait != nil {
			accountLockWait(id)
		}
		m.Lock()
	}
	return m.Unlock
}
