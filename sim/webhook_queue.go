package sim

import "time"

// item is a heap entry: a single status to batch, or a batch to resend.
// seq breaks ties between equal due times, so statuses planned for the
// same instant (zero delay) still leave in the order they were planned.
type item struct {
	due time.Time
	seq uint64
	st  *hookStatus
	b   *batch
}

func (it item) size() int {
	if it.b != nil {
		return it.b.n
	}
	return 1
}

// itemHeap orders items by due time.
type itemHeap []item

func (q itemHeap) Len() int { return len(q) }
func (q itemHeap) Less(i, j int) bool {
	if !q[i].due.Equal(q[j].due) {
		return q[i].due.Before(q[j].due)
	}
	return q[i].seq < q[j].seq
}
func (q itemHeap) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *itemHeap) Push(x any)   { *q = append(*q, x.(item)) }
func (q *itemHeap) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}
