package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// testFence: partition epochs and the fence they put on message updates.
func testFence(t *testing.T, newStore NewStore) {
	t.Run("EpochsGrow", func(t *testing.T) { testEpochsGrow(t, newStore(t)) })
	t.Run("Leases", func(t *testing.T) { testLeases(t, newStore(t)) })
	t.Run("AccountPatch", func(t *testing.T) { testFencedAccountPatch(t, newStore(t)) })
	t.Run("StaleFenceChangesNothing", func(t *testing.T) { testStaleFence(t, newStore(t)) })
	t.Run("NewerAcquisitionFencesSendingAndAccepted", func(t *testing.T) { testFencedLifecycle(t, newStore(t)) })
	t.Run("ConcurrentAcquisitions", func(t *testing.T) { testConcurrentAcquisitions(t, newStore(t)) })
	t.Run("ApplySeq", func(t *testing.T) { testFencedApplySeq(t, newStore(t)) })
	t.Run("RefusalStaysIsolated", func(t *testing.T) { testFenceIsolated(t, newStore(t)) })
}

func acquire(t *testing.T, s store.Store, partition int, node string) int64 {
	t.Helper()
	epoch, err := s.AcquirePartition(ctx(t), partition, node)
	must(t, err)
	return epoch
}

func wantEpoch(t *testing.T, s store.Store, partition int, want int64) {
	t.Helper()
	got, err := s.PartitionEpoch(ctx(t), partition)
	must(t, err)
	if got != want {
		t.Fatalf("partition %d epoch = %d, want %d", partition, got, want)
	}
}

// wantFenced fails the test unless err wraps store.ErrFenced.
func wantFenced(t *testing.T, applied bool, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrFenced) || applied {
		t.Fatalf("fenced update = %v, %v; want false and an error wrapping ErrFenced", applied, err)
	}
}

// wantUnchanged fails the test unless the stored message is before in
// every field an update may change.
func wantUnchanged(t *testing.T, s store.Store, before wamux.Message) {
	t.Helper()
	m := getMessage(t, s, before.ID)
	if m.Status != before.Status || m.WAMID != before.WAMID || m.Attempts != before.Attempts ||
		m.LastError != before.LastError || m.AccountID != before.AccountID || !m.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("a refused update changed the message: %+v, was %+v", m, before)
	}
}

func testEpochsGrow(t *testing.T, s store.Store) {
	wantEpoch(t, s, 0, 0)
	for want := int64(1); want <= 3; want++ {
		if got := acquire(t, s, 0, fmt.Sprintf("node-%d", want)); got != want {
			t.Fatalf("acquisition %d of partition 0 got epoch %d", want, got)
		}
		wantEpoch(t, s, 0, want)
	}
	if got := acquire(t, s, 7, "node-1"); got != 1 {
		t.Fatalf("first acquisition of partition 7 got epoch %d, want 1 (each partition counts its own)", got)
	}
	wantEpoch(t, s, 0, 3)
	_, err := s.AcquirePartition(ctx(t), -1, "node-1")
	wantCode(t, err, wamux.EInvalid)
	_, err = s.AcquirePartition(ctx(t), 1, "")
	wantCode(t, err, wamux.EInvalid)
	wantEpoch(t, s, 1, 0)
}

func testLeases(t *testing.T, s store.Store) {
	ls, err := s.PartitionLeases(ctx(t))
	must(t, err)
	if len(ls) != 0 {
		t.Fatalf("leases of a new store = %+v, want none", ls)
	}
	acquire(t, s, 5, "node-a")
	acquire(t, s, 2, "node-a")
	acquire(t, s, 5, "node-b")
	ls, err = s.PartitionLeases(ctx(t))
	must(t, err)
	type lease struct {
		p     int
		epoch int64
		node  string
	}
	var got []lease
	for _, l := range ls {
		if l.AcquiredAt.IsZero() {
			t.Fatalf("lease of partition %d has no acquisition time", l.Partition)
		}
		got = append(got, lease{l.Partition, l.Epoch, l.Holder})
	}
	want := []lease{{2, 1, "node-a"}, {5, 2, "node-b"}}
	if !slices.Equal(got, want) {
		t.Fatalf("leases = %+v, want %+v (by partition, the last holder)", got, want)
	}
}

func testFencedAccountPatch(t *testing.T, s store.Store) {
	_, err := s.CreateAccount(ctx(t), testAccount("acc1", "1001"))
	must(t, err)
	acquire(t, s, 3, "node-1")
	acquire(t, s, 3, "node-2")
	before, err := s.GetAccount(ctx(t), "acc1")
	must(t, err)
	disabled, reason := wamux.AccountDisabled, "131031: account locked"
	_, err = s.UpdateAccount(ctx(t), "acc1", store.AccountPatch{State: &disabled, StateReason: &reason,
		Fence: &store.Fence{Partition: 3, Epoch: 1}})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("patch under a stale fence = %v; want an error wrapping ErrFenced", err)
	}
	after, err := s.GetAccount(ctx(t), "acc1")
	must(t, err)
	if after.State != before.State || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("a refused patch changed the account: %+v, was %+v", after, before)
	}
	got, err := s.UpdateAccount(ctx(t), "acc1", store.AccountPatch{State: &disabled, StateReason: &reason,
		Fence: &store.Fence{Partition: 3, Epoch: 2}})
	must(t, err)
	if got.State != wamux.AccountDisabled {
		t.Fatalf("patch under the current fence left state %s", got.State)
	}
	_, err = s.UpdateAccount(ctx(t), "missing", store.AccountPatch{State: &disabled, Fence: &store.Fence{Partition: 3, Epoch: 2}})
	wantCode(t, err, wamux.ENotFound)
	_, err = s.UpdateAccount(ctx(t), "missing", store.AccountPatch{State: &disabled, Fence: &store.Fence{Partition: 4, Epoch: 1}})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("patch of a missing account under a partition never acquired = %v; want ErrFenced", err)
	}
}

func testStaleFence(t *testing.T, s store.Store) {
	insertOne(t, s, testMessage("f1", "acc1", 0, "h"))
	before := getMessage(t, s, "f1")
	nextMilli(t)
	toSending := func(f *store.Fence) (bool, error) {
		reason := "tried"
		return s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "f1", From: []wamux.Status{wamux.StatusQueued},
			Status: wamux.StatusSending, AttemptsDelta: 1, LastError: &reason, AccountID: "acc2", Fence: f})
	}
	// Never acquired: no epoch is current.
	ok, err := toSending(&store.Fence{Partition: 3, Epoch: 1})
	wantFenced(t, ok, err)
	wantUnchanged(t, s, before)

	old := acquire(t, s, 3, "node-a")
	cur := acquire(t, s, 3, "node-b")
	for _, stale := range []int64{old, cur + 1, 0} {
		ok, err := toSending(&store.Fence{Partition: 3, Epoch: stale})
		wantFenced(t, ok, err)
		wantUnchanged(t, s, before)
	}
	// Another partition's epoch does not fence this one.
	acquire(t, s, 4, "node-a")
	ok, err = toSending(&store.Fence{Partition: 4, Epoch: cur})
	wantFenced(t, ok, err)
	wantUnchanged(t, s, before)

	ok, err = toSending(&store.Fence{Partition: 3, Epoch: cur})
	if err != nil || !ok {
		t.Fatalf("update under the current epoch = %v, %v; want applied", ok, err)
	}
	if m := getMessage(t, s, "f1"); m.Status != wamux.StatusSending || m.Attempts != 1 || m.AccountID != "acc2" {
		t.Fatalf("after the current fence's update: %+v", m)
	}
	// The current fence with a failing precondition is an ordinary false;
	// on a missing message ENotFound.
	ok, err = toSending(&store.Fence{Partition: 3, Epoch: cur})
	if err != nil || ok {
		t.Fatalf("current fence, status not queued = %v, %v; want false, nil", ok, err)
	}
	_, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "nope", Status: wamux.StatusSending, Fence: &store.Fence{Partition: 3, Epoch: cur}})
	wantCode(t, err, wamux.ENotFound)
	// A stale fence is reported before anything else.
	ok, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "nope", Status: wamux.StatusSending, Fence: &store.Fence{Partition: 3, Epoch: old}})
	wantFenced(t, ok, err)
	_, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "f1", Status: wamux.StatusSending, Fence: &store.Fence{Partition: -1, Epoch: 1}})
	wantCode(t, err, wamux.EInvalid)
	// Unfenced updates ignore the leases.
	if !update(t, s, store.MessageUpdate{MsgID: "f1", From: []wamux.Status{wamux.StatusSending}, Status: wamux.StatusQueued}) {
		t.Fatal("unfenced update did not apply")
	}
}

// testFencedLifecycle: a node sends under its lease; another node
// acquires the partition while the message is in flight; the first
// node's sending → accepted is refused, and so is its next queued →
// sending, while the new holder's apply.
func testFencedLifecycle(t *testing.T, s store.Store) {
	insertOne(t, s, testMessage("fl1", "acc1", 0, "h1"))
	insertOne(t, s, testMessage("fl2", "acc1", 0, "h2"))
	a := &store.Fence{Partition: 2, Epoch: acquire(t, s, 2, "node-a")}
	queued, sending := []wamux.Status{wamux.StatusQueued}, []wamux.Status{wamux.StatusSending}
	ok, err := s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "fl1", From: queued, Status: wamux.StatusSending, AttemptsDelta: 1, Fence: a})
	if err != nil || !ok {
		t.Fatalf("node a's queued → sending = %v, %v", ok, err)
	}
	b := &store.Fence{Partition: 2, Epoch: acquire(t, s, 2, "node-b")}

	before := getMessage(t, s, "fl1")
	ok, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "fl1", From: sending, Status: wamux.StatusAccepted, WAMID: "wamid.fl1", Fence: a})
	wantFenced(t, ok, err)
	wantUnchanged(t, s, before)
	before2 := getMessage(t, s, "fl2")
	ok, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "fl2", From: queued, Status: wamux.StatusSending, AttemptsDelta: 1, Fence: a})
	wantFenced(t, ok, err)
	wantUnchanged(t, s, before2)

	ok, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "fl2", From: queued, Status: wamux.StatusSending, AttemptsDelta: 1, Fence: b})
	if err != nil || !ok {
		t.Fatalf("node b's queued → sending = %v, %v", ok, err)
	}
	ok, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "fl2", From: sending, Status: wamux.StatusAccepted, WAMID: "wamid.fl2", Fence: b})
	if err != nil || !ok {
		t.Fatalf("node b's sending → accepted = %v, %v", ok, err)
	}
	if m := getMessage(t, s, "fl2"); m.Status != wamux.StatusAccepted || m.WAMID != "wamid.fl2" {
		t.Fatalf("fl2 = %+v, want accepted as wamid.fl2", m)
	}
}

// testConcurrentAcquisitions: nodes acquiring one partition at once get
// distinct epochs, and only the highest one's fence applies.
func testConcurrentAcquisitions(t *testing.T, s store.Store) {
	const nodes = 8
	base := acquire(t, s, 5, "node-0")
	insertOne(t, s, testMessage("ca1", "acc1", 0, "h"))
	epochs := make([]int64, nodes)
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() { epochs[i], errs[i] = s.AcquirePartition(ctx(t), 5, fmt.Sprintf("node-%d", i+1)) })
	}
	wg.Wait()
	for _, err := range errs {
		must(t, err)
	}
	got := slices.Sorted(slices.Values(epochs))
	for i, e := range got {
		if e != base+int64(i)+1 {
			t.Fatalf("concurrent acquisitions got epochs %v, want %d..%d once each", got, base+1, base+nodes)
		}
	}
	last := got[nodes-1]
	wantEpoch(t, s, 5, last)
	before := getMessage(t, s, "ca1")
	for _, e := range got[:nodes-1] {
		ok, err := s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "ca1", Status: wamux.StatusSending, Fence: &store.Fence{Partition: 5, Epoch: e}})
		wantFenced(t, ok, err)
		wantUnchanged(t, s, before)
	}
	ok, err := s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "ca1", Status: wamux.StatusSending, Fence: &store.Fence{Partition: 5, Epoch: last}})
	if err != nil || !ok {
		t.Fatalf("the last acquisition's fence = %v, %v; want applied", ok, err)
	}
}

// testFencedApplySeq: a reorder-buffer step with a stale fence on any of
// its updates writes nothing, its sequence state included.
func testFencedApplySeq(t *testing.T, s store.Store) {
	a, b := testMessage("fs-1", "acc1", 1, "h1"), testMessage("fs-2", "acc1", 2, "h2")
	a.Status, b.Status = wamux.StatusWaitingSeq, wamux.StatusWaitingSeq
	if _, err := s.InsertMessages(ctx(t), []wamux.Message{a, b}); err != nil {
		t.Fatal(err)
	}
	old := &store.Fence{Partition: 1, Epoch: acquire(t, s, 1, "node-a")}
	cur := &store.Fence{Partition: 1, Epoch: acquire(t, s, 1, "node-b")}
	waiting := []wamux.Status{wamux.StatusWaitingSeq}
	_, err := s.ApplySeq(ctx(t), store.SeqState{AccountID: "acc1", NextSeq: 3}, []store.MessageUpdate{
		{MsgID: "fs-1", From: waiting, Status: wamux.StatusQueued, Fence: cur},
		{MsgID: "fs-2", From: waiting, Status: wamux.StatusQueued, Fence: old},
	})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("ApplySeq with a stale fence: %v, want ErrFenced", err)
	}
	for _, id := range []string{"fs-1", "fs-2"} {
		if m := getMessage(t, s, id); m.Status != wamux.StatusWaitingSeq {
			t.Fatalf("a fenced step changed %s to %s", id, m.Status)
		}
	}
	if st, _ := s.GetSeq(ctx(t), "acc1"); st.NextSeq != 1 {
		t.Fatalf("a fenced step moved NextSeq to %d", st.NextSeq)
	}
	res, err := s.ApplySeq(ctx(t), store.SeqState{AccountID: "acc1", NextSeq: 3}, []store.MessageUpdate{
		{MsgID: "fs-1", From: waiting, Status: wamux.StatusQueued, Fence: cur},
		{MsgID: "fs-2", From: waiting, Status: wamux.StatusQueued, Fence: cur},
	})
	if err != nil || !slices.Equal(res, []bool{true, true}) {
		t.Fatalf("ApplySeq under the current fence = %v, %v", res, err)
	}
}

// testFenceIsolated: many concurrent fenced updates (which a group commit
// may put in one transaction), one of them under a stale epoch: it is
// refused with ErrFenced and changes nothing, all others land.
func testFenceIsolated(t *testing.T, s store.Store) {
	const n = 40
	var msgs []wamux.Message
	for i := range n {
		msgs = append(msgs, testMessage(fmt.Sprintf("fi-%02d", i), "acc1", 0, "h"))
	}
	if _, err := s.InsertMessages(ctx(t), msgs); err != nil {
		t.Fatal(err)
	}
	old := &store.Fence{Partition: 0, Epoch: acquire(t, s, 0, "node-a")}
	cur := &store.Fence{Partition: 0, Epoch: acquire(t, s, 0, "node-b")}
	stale := n / 2
	before := getMessage(t, s, msgs[stale].ID)
	var wg sync.WaitGroup
	applied, errs := make([]bool, n), make([]error, n)
	for i := range n {
		f := cur
		if i == stale {
			f = old
		}
		wg.Go(func() {
			applied[i], errs[i] = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: msgs[i].ID, From: []wamux.Status{wamux.StatusQueued},
				Status: wamux.StatusAccepted, WAMID: "wamid." + msgs[i].ID, AttemptsDelta: 1, Fence: f})
		})
	}
	wg.Wait()
	for i := range n {
		if i == stale {
			wantFenced(t, applied[i], errs[i])
			wantUnchanged(t, s, before)
			continue
		}
		m := getMessage(t, s, msgs[i].ID)
		if errs[i] != nil || !applied[i] || m.Status != wamux.StatusAccepted || m.WAMID != "wamid."+msgs[i].ID || m.Attempts != 1 {
			t.Fatalf("update %d: %v %v, message %+v", i, applied[i], errs[i], m)
		}
	}
}
