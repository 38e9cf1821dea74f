// Package storetest is the conformance suite every store.Store passes.
// A backend's test calls Run with a constructor for fresh, empty stores:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { … })
//	}
package storetest

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// NewStore returns a fresh, empty store for one subtest. It must close the
// store in t.Cleanup; Close must tolerate being called twice because one
// subtest closes it early.
type NewStore func(t *testing.T) store.Store

// Run runs the whole suite against stores made by newStore.
func Run(t *testing.T, newStore NewStore) {
	t.Run("Ping", func(t *testing.T) { testPing(t, newStore(t)) })
	t.Run("Accounts", func(t *testing.T) { testAccounts(t, newStore) })
	t.Run("Messages", func(t *testing.T) { testMessages(t, newStore) })
	t.Run("Receipts", func(t *testing.T) { testReceipts(t, newStore) })
	t.Run("States", func(t *testing.T) { testStates(t, newStore(t)) })
	t.Run("LateReceipts", func(t *testing.T) { testLateReceipts(t, newStore(t)) })
	t.Run("DeadLetters", func(t *testing.T) { testDeadLetters(t, newStore(t)) })
	t.Run("Owners", func(t *testing.T) { testOwners(t, newStore(t)) })
	t.Run("Seq", func(t *testing.T) { testSeq(t, newStore(t)) })
	t.Run("ApplySeq", func(t *testing.T) { testApplySeq(t, newStore(t)) })
	t.Run("UpdatesIsolated", func(t *testing.T) { testUpdatesIsolated(t, newStore(t)) })
	t.Run("Settings", func(t *testing.T) { testSettings(t, newStore(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, newStore(t)) })
	t.Run("ConcurrentClientSeq", func(t *testing.T) { testConcurrentClientSeq(t, newStore(t)) })
	t.Run("FailuresStayIsolated", func(t *testing.T) { testFailuresIsolated(t, newStore(t)) })
	t.Run("Closed", func(t *testing.T) { testClosed(t, newStore(t)) })
	t.Run("Pipeline", func(t *testing.T) { testPipeline(t, newStore) })
	t.Run("Events", func(t *testing.T) { testEvents(t, newStore) })
	t.Run("Inbound", func(t *testing.T) { testInbound(t, newStore) })
	t.Run("AdminAudit", func(t *testing.T) { testAdminAudit(t, newStore(t)) })
	t.Run("Queue", func(t *testing.T) { testQueue(t, newStore(t)) })
	t.Run("QueueLarge", func(t *testing.T) { testQueueLarge(t, newStore(t)) })
	t.Run("Fence", func(t *testing.T) { testFence(t, newStore) })
}

func ctx(t *testing.T) context.Context { return t.Context() }

// wantCode fails the test unless err carries the domain code want.
func wantCode(t *testing.T, err error, want string) {
	t.Helper()
	if got := wamux.ErrorCode(err); got != want {
		t.Fatalf("error code = %q (%v), want %q", got, err, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

// nextMilli waits (without sleeping on a guess) until the wall clock has
// moved to a later millisecond, so stamps taken before and after differ.
func nextMilli(t *testing.T) {
	t.Helper()
	start := time.Now().UnixMilli()
	for time.Now().UnixMilli() == start {
		time.Sleep(50 * time.Microsecond)
	}
}

func wantUTC(t *testing.T, what string, tm time.Time) {
	t.Helper()
	if tm.IsZero() {
		t.Fatalf("%s is zero", what)
	}
	if tm.Location() != time.UTC {
		t.Fatalf("%s location = %v, want UTC", what, tm.Location())
	}
}

// msTime truncates to what the store keeps: whole milliseconds, UTC.
func msTime(tm time.Time) time.Time { return time.UnixMilli(tm.UnixMilli()).UTC() }

func testPing(t *testing.T, s store.Store) {
	must(t, s.Ping(ctx(t)))
}

func testClosed(t *testing.T, s store.Store) {
	must(t, s.PutSettings(ctx(t), map[string]string{"k": "v"}))
	must(t, s.Close())
	if err := s.PutSettings(ctx(t), map[string]string{"k": "w"}); err == nil {
		t.Fatal("PutSettings after Close succeeded")
	}
	if err := s.Ping(ctx(t)); err == nil {
		t.Fatal("Ping after Close succeeded")
	}
}

func testSettings(t *testing.T, s store.Store) {
	got, err := s.Settings(ctx(t))
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("fresh store settings = %v, want none", got)
	}
	must(t, s.PutSettings(ctx(t), map[string]string{"gap_timeout": "5m", "late_window": "1m"}))
	must(t, s.PutSettings(ctx(t), map[string]string{"late_window": "2m", "bloom": "off"}))
	got, err = s.Settings(ctx(t))
	must(t, err)
	want := map[string]string{"gap_timeout": "5m", "late_window": "2m", "bloom": "off"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("settings = %v, want %v", got, want)
	}
}

func testSeq(t *testing.T, s store.Store) {
	st, err := s.GetSeq(ctx(t), "acc1")
	must(t, err)
	if st.AccountID != "acc1" || st.NextSeq != 1 || st.GapsSkipped != 0 {
		t.Fatalf("fresh seq = %+v, want acc1 NextSeq 1", st)
	}
	must(t, s.PutSeq(ctx(t), store.SeqState{AccountID: "acc1", NextSeq: 42, GapsSkipped: 3}))
	must(t, s.PutSeq(ctx(t), store.SeqState{AccountID: "acc1", NextSeq: 43, GapsSkipped: 4}))
	st, err = s.GetSeq(ctx(t), "acc1")
	must(t, err)
	if st.AccountID != "acc1" || st.NextSeq != 43 || st.GapsSkipped != 4 {
		t.Fatalf("seq = %+v, want NextSeq 43 GapsSkipped 4", st)
	}
	wantUTC(t, "seq UpdatedAt", st.UpdatedAt)
	other, err := s.GetSeq(ctx(t), "acc2")
	must(t, err)
	if other.NextSeq != 1 {
		t.Fatalf("other account seq = %+v, want NextSeq 1", other)
	}
}

func testOwners(t *testing.T, s store.Store) {
	_, err := s.GetOwner(ctx(t), "+491")
	wantCode(t, err, wamux.ENotFound)
	must(t, s.SetOwner(ctx(t), "+491", "accA", "first"))
	must(t, s.SetOwner(ctx(t), "+492", "accC", "first"))
	owner, err := s.GetOwner(ctx(t), "+491")
	must(t, err)
	if owner != "accA" {
		t.Fatalf("owner = %q, want accA", owner)
	}
	must(t, s.SetOwner(ctx(t), "+491", "accB", "accA disabled"))
	owner, err = s.GetOwner(ctx(t), "+491")
	must(t, err)
	if owner != "accB" {
		t.Fatalf("owner after move = %q, want accB", owner)
	}
	moves, err := s.ListOwnerMoves(ctx(t), "+491")
	must(t, err)
	if len(moves) != 2 {
		t.Fatalf("moves = %+v, want 2", moves)
	}
	want := []store.OwnerMove{
		{Recipient: "+491", From: "", To: "accA", Reason: "first"},
		{Recipient: "+491", From: "accA", To: "accB", Reason: "accA disabled"},
	}
	for i, m := range moves {
		wantUTC(t, "MovedAt", m.MovedAt)
		m.MovedAt = time.Time{}
		if m != want[i] {
			t.Fatalf("move %d = %+v, want %+v", i, m, want[i])
		}
	}
	if moves[1].MovedAt.Before(moves[0].MovedAt) {
		t.Fatalf("moves not oldest first: %+v", moves)
	}
	other, err := s.ListOwnerMoves(ctx(t), "+493")
	must(t, err)
	if len(other) != 0 {
		t.Fatalf("moves of a recipient never owned = %+v", other)
	}
}

func testLateReceipts(t *testing.T, s store.Store) {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var in []store.LateReceipt
	for i, reason := range []string{"r0", "r1", "r2"} {
		in = append(in, store.LateReceipt{
			Receipt: wamux.Receipt{MessageID: fmt.Sprintf("wamid.%d", i), AccountID: "acc1", Type: wamux.ReceiptRead,
				EventTime: base.Add(time.Duration(i) * time.Second), Source: "webhook", Recipient: "+49",
				ErrorCode: 7, ErrorTitle: "t", CallbackData: "cb", ReceivedAt: base},
			Reason:     reason,
			RecordedAt: base.Add(time.Duration(i) * time.Minute),
		})
	}
	// Stored out of order: the listing must sort by time, not insertion.
	must(t, s.AddLateReceipts(ctx(t), []store.LateReceipt{in[1], in[2]}))
	must(t, s.AddLateReceipts(ctx(t), []store.LateReceipt{in[0]}))
	got, err := s.ListLateReceipts(ctx(t), 10)
	must(t, err)
	if len(got) != 3 {
		t.Fatalf("late receipts = %d, want 3", len(got))
	}
	for i, g := range got {
		want := in[2-i]
		if g.Reason != want.Reason || !g.RecordedAt.Equal(want.RecordedAt) || g.Receipt != want.Receipt {
			t.Fatalf("late receipt %d = %+v, want %+v", i, g, want)
		}
		wantUTC(t, "RecordedAt", g.RecordedAt)
	}
	got, err = s.ListLateReceipts(ctx(t), 2)
	must(t, err)
	if len(got) != 2 || got[0].Reason != "r2" || got[1].Reason != "r1" {
		t.Fatalf("limited late receipts = %+v, want r2, r1", got)
	}
}

func testDeadLetters(t *testing.T, s store.Store) {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	must(t, s.AddDeadLetters(ctx(t), []store.DeadLetter{
		{Source: "webhook", AccountID: "acc1", Reason: "bad json", Payload: []byte("{x"), RecordedAt: base.Add(time.Minute)},
		{Source: "agent", AccountID: "acc2", Reason: "unknown account", Payload: []byte{0, 1, 2}, RecordedAt: base},
	}))
	must(t, s.AddDeadLetters(ctx(t), []store.DeadLetter{
		{Source: "dispatch", AccountID: "acc1", Reason: "max attempts", RecordedAt: base.Add(2 * time.Minute)},
	}))
	got, err := s.ListDeadLetters(ctx(t), 10)
	must(t, err)
	if len(got) != 3 {
		t.Fatalf("dead letters = %d, want 3", len(got))
	}
	wantReasons := []string{"max attempts", "bad json", "unknown account"}
	ids := map[int64]bool{}
	for i, d := range got {
		if d.Reason != wantReasons[i] {
			t.Fatalf("dead letter %d reason = %q, want %q (newest first)", i, d.Reason, wantReasons[i])
		}
		if d.ID == 0 || ids[d.ID] {
			t.Fatalf("dead letter %d has id %d, want a fresh non-zero id", i, d.ID)
		}
		ids[d.ID] = true
		wantUTC(t, "RecordedAt", d.RecordedAt)
	}
	if got[1].Source != "webhook" || got[1].AccountID != "acc1" || !bytes.Equal(got[1].Payload, []byte("{x")) ||
		!got[1].RecordedAt.Equal(base.Add(time.Minute)) {
		t.Fatalf("dead letter round trip = %+v", got[1])
	}
	if !bytes.Equal(got[2].Payload, []byte{0, 1, 2}) {
		t.Fatalf("binary payload = %v", got[2].Payload)
	}
	got, err = s.ListDeadLetters(ctx(t), 1)
	must(t, err)
	if len(got) != 1 || got[0].Reason != "max attempts" {
		t.Fatalf("limited dead letters = %+v", got)
	}
}
