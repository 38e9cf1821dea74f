// Package ownership says which accounts this node works on, and under
// which fence. An account belongs to one partition (wamux.PartitionOf);
// a node works on the accounts of the partitions it holds, and holds each
// under a lease whose epoch the store bumped when the node acquired it
// (store.FenceStore). The send and receipt pipelines ask Lease before
// they change an account's messages and carry the lease as the update's
// store.Fence, so a node that lost a partition, even one that has not
// noticed yet, has its updates refused with store.ErrFenced.
//
// Two implementations: Embedded, for the single gateway that claims its
// whole store (it holds every partition for as long as its claim lasts),
// and Cluster, told its partitions by the stream's consumer group
// (Assign, Revoke). Both pass the suite in ownership/ownershiptest.
package ownership

import (
	"github.com/wamux/wamux/store"
)

// Ownership is this node's view of which partitions it holds.
type Ownership interface {
	// Partitions is the number of partitions accounts are spread over.
	Partitions() int
	// Lease reports whether this node holds the account's partition now,
	// and the lease to fence the account's message updates with.
	Lease(accountID string) (Lease, bool)
	// Watch calls fn with each change of the held partitions, one call at
	// a time and in the order they happened, starting with the partitions
	// held when Watch is called (no call when none are). Calls come from a
	// goroutine of the Ownership's own; fn must not Assign or Revoke. stop
	// ends the calls; one already running finishes.
	Watch(fn func(Change)) (stop func())
	// Fenced tells that the store refused l (store.ErrFenced): another
	// node acquired its partition since. The partition is dropped if it is
	// still held under l, and watchers are told; a newer lease stays.
	Fenced(l Lease)
}

// Lease is a partition held under the epoch of its acquisition.
type Lease struct {
	Partition int
	Epoch     int64
}

// Fence is the lease as the fence of a message update.
func (l Lease) Fence() *store.Fence {
	return &store.Fence{Partition: l.Partition, Epoch: l.Epoch}
}

// Change is one change of the partitions a node holds.
type Change struct {
	// Assigned are partitions now held, with their leases.
	Assigned []Lease
	// Revoked are partitions no longer held, with the leases they were
	// held under.
	Revoked []Lease
}
