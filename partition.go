package wamux

import "hash/fnv"

// PartitionOf maps an account to one of n partitions (n ≥ 1): the unit in
// which account work is streamed, owned and fenced. Every node and every
// pipeline computes the same partition for the same account and n, so an
// account's receipts, sends and ownership always meet in one place. The
// rule is FNV-1a (32 bit) of the account id modulo n; changing it moves
// accounts between partitions, which a running cluster must not see.
func PartitionOf(accountID string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(accountID))
	return int(h.Sum32() % uint32(n))
}
