// Package ownershiptest is the conformance suite every
// ownership.Ownership passes, on a real store. A test calls Run with a
// constructor of fresh subjects:
//
//	func TestCluster(t *testing.T) {
//		ownershiptest.Run(t, func(t *testing.T, partitions int) ownershiptest.Subject { … })
//	}
package ownershiptest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/ownership"
	"github.com/wamux/wamux/store"
)

// Subject is one Ownership under test and the means to move its
// partitions.
type Subject struct {
	Own ownership.Ownership
	// Store is the store its leases are in, empty at the start; the suite
	// plays another node acquiring partitions in it.
	Store store.Store
	// Assign gives the node partitions and returns once its watchers have
	// been told; nil for an Ownership that holds every partition from the
	// start.
	Assign func(ctx context.Context, partitions []int) error
	// Revoke takes partitions from the node and returns once its watchers
	// have been told. An Ownership without Assign loses all of them at
	// once, whichever are named.
	Revoke func(partitions []int)
}

// NewSubject returns a fresh subject over the given number of partitions,
// closed in t.Cleanup.
type NewSubject func(t *testing.T, partitions int) Subject

// Run runs the suite.
func Run(t *testing.T, newSubject NewSubject) {
	t.Run("LeasesFollowAssignment", func(t *testing.T) { testLeasesFollowAssignment(t, newSubject) })
	t.Run("WatchSeesChangesInOrder", func(t *testing.T) { testWatchInOrder(t, newSubject) })
	t.Run("OtherNodeFencesOldLease", func(t *testing.T) { testOtherNodeFences(t, newSubject) })
	t.Run("FencedOldLeaseKeepsNewer", func(t *testing.T) { testFencedKeepsNewer(t, newSubject) })
}

// accounts returns an account id of each partition.
func accounts(t *testing.T, n int) []string {
	t.Helper()
	out := make([]string, n)
	found := 0
	for i := 0; found < n; i++ {
		if i > 100*n {
			t.Fatalf("no account id for every one of %d partitions", n)
		}
		a := fmt.Sprintf("acc-%d", i)
		if p := wamux.PartitionOf(a, n); out[p] == "" {
			out[p] = a
			found++
		}
	}
	return out
}

// held returns the partitions whose accounts Lease says are held, and
// checks each lease against the store's epoch.
func held(t *testing.T, s Subject, accs []string) []int {
	t.Helper()
	var out []int
	for p, a := range accs {
		l, ok := s.Own.Lease(a)
		if l.Partition != p {
			t.Fatalf("Lease(%s) names partition %d, want %d (wamux.PartitionOf)", a, l.Partition, p)
		}
		if !ok {
			continue
		}
		epoch, err := s.Store.PartitionEpoch(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		if l.Epoch != epoch || epoch == 0 {
			t.Fatalf("lease of partition %d is at epoch %d, the store at %d", p, l.Epoch, epoch)
		}
		out = append(out, p)
	}
	return out
}

func wantHeld(t *testing.T, s Subject, accs []string, want ...int) {
	t.Helper()
	if got := held(t, s, accs); !slices.Equal(got, want) {
		t.Fatalf("held partitions %v, want %v", got, want)
	}
}

func all(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// recorder is a watcher that keeps what it was told.
type recorder struct {
	mu      sync.Mutex
	changes []ownership.Change
	signal  chan struct{}
}

func watch(t *testing.T, own ownership.Ownership) *recorder {
	r := &recorder{signal: make(chan struct{}, 100)}
	stop := own.Watch(func(c ownership.Change) {
		r.mu.Lock()
		r.changes = append(r.changes, c)
		r.mu.Unlock()
		r.signal <- struct{}{}
	})
	t.Cleanup(stop)
	return r
}

// wait returns the first n changes once they were told.
func (r *recorder) wait(t *testing.T, n int) []ownership.Change {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		got := slices.Clone(r.changes)
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-r.signal:
		case <-timeout:
			t.Fatalf("watcher told %d changes (%+v), want %d", len(got), got, n)
		}
	}
}

func partitionsOf(ls []ownership.Lease) []int {
	out := []int{}
	for _, l := range ls {
		out = append(out, l.Partition)
	}
	slices.Sort(out)
	return out
}

// wantChange checks a change's partitions (nil: none).
func wantChange(t *testing.T, c ownership.Change, assigned, revoked []int) {
	t.Helper()
	if a, r := partitionsOf(c.Assigned), partitionsOf(c.Revoked); !slices.Equal(a, append([]int{}, assigned...)) || !slices.Equal(r, append([]int{}, revoked...)) {
		t.Fatalf("change assigned %v revoked %v, want %v and %v", a, r, assigned, revoked)
	}
}

func testLeasesFollowAssignment(t *testing.T, newSubject NewSubject) {
	const n = 4
	s := newSubject(t, n)
	accs := accounts(t, n)
	if s.Own.Partitions() != n {
		t.Fatalf("Partitions() = %d, want %d", s.Own.Partitions(), n)
	}
	if s.Assign == nil {
		wantHeld(t, s, accs, all(n)...)
		s.Revoke([]int{1})
		wantHeld(t, s, accs)
		return
	}
	wantHeld(t, s, accs)
	if err := s.Assign(t.Context(), []int{1, 3}); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, s, accs, 1, 3)
	before, _ := s.Own.Lease(accs[3])
	if err := s.Assign(t.Context(), []int{0, 3}); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, s, accs, 0, 1, 3)
	if after, _ := s.Own.Lease(accs[3]); after != before {
		t.Fatalf("assigning a held partition again moved its lease from %+v to %+v", before, after)
	}
	s.Revoke([]int{1, 2})
	wantHeld(t, s, accs, 0, 3)
	if err := s.Assign(t.Context(), []int{n}); err == nil {
		t.Fatalf("Assign of partition %d of %d succeeded", n, n)
	}
	if err := s.Assign(t.Context(), []int{1}); err != nil {
		t.Fatal(err)
	}
	wantHeld(t, s, accs, 0, 1, 3)
}

func testWatchInOrder(t *testing.T, newSubject NewSubject) {
	const n = 4
	s := newSubject(t, n)
	accs := accounts(t, n)
	if s.Assign == nil {
		first := watch(t, s.Own)
		got := first.wait(t, 1)
		wantChange(t, got[0], all(n), nil)
		s.Revoke(all(n))
		got = first.wait(t, 2)
		wantChange(t, got[1], nil, all(n))
		if l, ok := s.Own.Lease(accs[0]); ok {
			t.Fatalf("lease %+v after every partition was revoked", l)
		}
		return
	}
	first := watch(t, s.Own)
	steps := []struct {
		assign, revoke []int
	}{
		{assign: []int{0, 1}},
		{revoke: []int{0}},
		{assign: []int{2, 3}},
		{revoke: []int{1, 3}},
		{assign: []int{0}},
	}
	var second *recorder
	for i, st := range steps {
		if st.assign != nil {
			if err := s.Assign(t.Context(), st.assign); err != nil {
				t.Fatal(err)
			}
		} else {
			s.Revoke(st.revoke)
		}
		if i == 2 {
			// A watcher joining now is first told what is held.
			second = watch(t, s.Own)
		}
	}
	// Revoking what is not held changes nothing and tells nothing.
	s.Revoke([]int{3})
	got := first.wait(t, len(steps))
	for i, st := range steps {
		wantChange(t, got[i], st.assign, st.revoke)
	}
	got2 := second.wait(t, 3)
	wantChange(t, got2[0], []int{1, 2, 3}, nil)
	wantChange(t, got2[1], nil, []int{1, 3})
	wantChange(t, got2[2], []int{0}, nil)
	// The leases told are the ones Lease answers.
	l, _ := s.Own.Lease(accs[0])
	if got[4].Assigned[0] != l {
		t.Fatalf("told lease %+v, Lease answers %+v", got[4].Assigned[0], l)
	}
	wantHeld(t, s, accs, 0, 2)
	if more := first.wait(t, 0); len(more) != len(steps) {
		t.Fatalf("watcher told %d changes, want %d", len(more), len(steps))
	}
}

// testOtherNodeFences: another node acquires a partition this one holds;
// this node's lease is then refused by the store, and Fenced drops it.
func testOtherNodeFences(t *testing.T, newSubject NewSubject) {
	const n = 2
	s := newSubject(t, n)
	accs := accounts(t, n)
	if s.Assign != nil {
		if err := s.Assign(t.Context(), all(n)); err != nil {
			t.Fatal(err)
		}
	}
	rec := watch(t, s.Own)
	rec.wait(t, 1)
	acc := accs[1]
	m := wamux.Message{ID: "m1", AccountID: acc, To: "+491", Type: "text", ContentHash: "h", Status: wamux.StatusQueued}
	if _, err := s.Store.InsertMessages(t.Context(), []wamux.Message{m}); err != nil {
		t.Fatal(err)
	}
	lease, ok := s.Own.Lease(acc)
	if !ok {
		t.Fatal("account not held after its partition was assigned")
	}
	ok, err := s.Store.UpdateMessage(t.Context(), store.MessageUpdate{MsgID: "m1", From: []wamux.Status{wamux.StatusQueued},
		Status: wamux.StatusSending, AttemptsDelta: 1, Fence: lease.Fence()})
	if err != nil || !ok {
		t.Fatalf("update under this node's lease = %v, %v", ok, err)
	}
	other, err := s.Store.AcquirePartition(t.Context(), lease.Partition, "other-node")
	if err != nil {
		t.Fatal(err)
	}
	ok, err = s.Store.UpdateMessage(t.Context(), store.MessageUpdate{MsgID: "m1", From: []wamux.Status{wamux.StatusSending},
		Status: wamux.StatusAccepted, WAMID: "wamid.m1", Fence: lease.Fence()})
	if !errors.Is(err, store.ErrFenced) || ok {
		t.Fatalf("update under the lease another node took over = %v, %v; want ErrFenced", ok, err)
	}
	if got, err := s.Store.GetMessage(t.Context(), "m1"); err != nil || got.Status != wamux.StatusSending || got.WAMID != "" {
		t.Fatalf("the refused update changed the message: %+v, %v", got, err)
	}
	s.Own.Fenced(lease)
	if l, ok := s.Own.Lease(acc); ok {
		t.Fatalf("Lease after Fenced = %+v, want not held", l)
	}
	got := rec.wait(t, 2)
	if len(got[1].Revoked) != 1 || got[1].Revoked[0] != lease || len(got[1].Assigned) != 0 {
		t.Fatalf("change after Fenced = %+v, want %+v revoked", got[1], lease)
	}
	if _, ok := s.Own.Lease(accs[0]); !ok {
		t.Fatal("Fenced dropped another partition too")
	}
	ok, err = s.Store.UpdateMessage(t.Context(), store.MessageUpdate{MsgID: "m1", From: []wamux.Status{wamux.StatusSending},
		Status: wamux.StatusAccepted, WAMID: "wamid.m1", Fence: &store.Fence{Partition: lease.Partition, Epoch: other}})
	if err != nil || !ok {
		t.Fatalf("the other node's update = %v, %v", ok, err)
	}
}

// testFencedKeepsNewer: a refusal of an older lease of a partition held
// again since leaves the newer lease alone.
func testFencedKeepsNewer(t *testing.T, newSubject NewSubject) {
	const n = 1
	s := newSubject(t, n)
	accs := accounts(t, n)
	if s.Assign == nil {
		old, ok := s.Own.Lease(accs[0])
		if !ok {
			t.Fatal("not held at the start")
		}
		s.Own.Fenced(ownership.Lease{Partition: 0, Epoch: old.Epoch - 1})
		s.Own.Fenced(ownership.Lease{Partition: n, Epoch: old.Epoch})
		if l, ok := s.Own.Lease(accs[0]); !ok || l != old {
			t.Fatalf("Fenced of another lease moved %+v to %+v, %v", old, l, ok)
		}
		return
	}
	if err := s.Assign(t.Context(), []int{0}); err != nil {
		t.Fatal(err)
	}
	old, _ := s.Own.Lease(accs[0])
	s.Revoke([]int{0})
	if err := s.Assign(t.Context(), []int{0}); err != nil {
		t.Fatal(err)
	}
	cur, ok := s.Own.Lease(accs[0])
	if !ok || cur.Epoch <= old.Epoch {
		t.Fatalf("lease after a new assignment %+v (held %v), before %+v", cur, ok, old)
	}
	s.Own.Fenced(old)
	if l, ok := s.Own.Lease(accs[0]); !ok || l != cur {
		t.Fatalf("Fenced(%+v) moved the newer lease %+v to %+v, %v", old, cur, l, ok)
	}
}
