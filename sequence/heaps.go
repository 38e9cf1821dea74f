package sequence

import "time"

// waiter is one waiting item. idx is its position in the arrival heap,
// so a release can take it out of there in O(log n).
type waiter[T any] struct {
	seq   int64
	item  T
	since time.Time
	idx   int
}

// seqHeap is a min-heap of waiting seqs. Releases always take its minimum:
// seqs leave in order, and a seq is in it exactly once, so it needs no lazy
// deletion. Seqs below NextSeq never enter it, which is why a late
// duplicate cannot block its head.
type seqHeap []int64

func (h seqHeap) Len() int           { return len(h) }
func (h seqHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h seqHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *seqHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *seqHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// arrivalHeap orders waiters by when they started waiting, so the ones
// whose gap timeout ran out are found at its top.
type arrivalHeap[T any] []*waiter[T]

func (h arrivalHeap[T]) Len() int { return len(h) }
func (h arrivalHeap[T]) Less(i, j int) bool {
	if h[i].since.Equal(h[j].since) {
		return h[i].seq < h[j].seq
	}
	return h[i].since.Before(h[j].since)
}
func (h arrivalHeap[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *arrivalHeap[T]) Push(x any) {
	w := x.(*waiter[T])
	w.idx = len(*h)
	*h = append(*h, w)
}
func (h *arrivalHeap[T]) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.idx = -1
	return w
}
