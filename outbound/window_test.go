package outbound_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/postgres/pgtest"
)

func depthSum(e *env, acc string) int {
	d := e.d.QueueDepth(acc)
	return d[0] + d[1] + d[2]
}

// TestBacklogBeyondWindowSentOnceInOrderAcrossRestart: 300 messages queue
// on a paused account whose queue_window is 20: 200 with client_seq over
// 10 recipients, each batch of 20 submitted in reverse so that the reorder
// buffer holds them until its lowest seq arrives, and 100 without one over
// 10 other recipients. The queue holds no more than the window while the
// depth reports all 300; the account then sends, is restarted midway, and
// every message reaches the simulator once, in client_seq order per
// recipient and in submission order for the others.
func TestBacklogBeyondWindowSentOnceInOrderAcrossRestart(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testBacklogBeyondWindow(t, nil) })
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN()
		if dsn == "" {
			t.Skip("WAMUX_TEST_POSTGRES not set")
		}
		testBacklogBeyondWindow(t, pgtest.Open(t, dsn, "outbound_window_"))
	})
}

func testBacklogBeyondWindow(t *testing.T, st store.Store) {
	const window = 20
	e := newEnv(t, envOpts{store: st, settings: map[string]string{"queue_window": fmt.Sprint(window)}})
	e.addAccount("acc", "8101", 1000, 100, sim.Limits{Rate: 1000, Burst: 1000})
	coolDown(t, e, "acc", time.Now().Add(time.Hour))

	seqOf := map[string]int64{}
	var seqTos, plainTos []string
	for i := range 10 {
		seqTos = append(seqTos, fmt.Sprintf("1555810%04d", i))
		plainTos = append(plainTos, fmt.Sprintf("1555820%04d", i))
	}
	plainOrder := map[string][]string{}
	for b := range 10 {
		var batch []wamux.Message
		for i := b*20 + 20; i > b*20; i-- {
			m := textMsg(t, admit.Request{AccountID: "acc", ClientSeq: seqp(int64(i)), To: seqTos[i%10]})
			seqOf[m.ID] = int64(i)
			batch = append(batch, m)
		}
		for i := range 10 {
			to := plainTos[(b+i)%10]
			m := textMsg(t, admit.Request{AccountID: "acc", MsgID: fmt.Sprintf("plain-%d-%d", b, i), To: to})
			plainOrder[to] = append(plainOrder[to], m.ID)
			batch = append(batch, m)
		}
		e.submit(batch...)
	}
	const n = 300
	testwait.For(t, "the whole backlog in the queue depth", 20*time.Second, func() bool { return depthSum(e, "acc") == n })
	if p := e.d.HeldPeak("acc"); p > window {
		t.Fatalf("the queue held %d messages in memory, over the window of %d", p, window)
	}

	awaitReactivated(t, reactivate(t, e))
	e.waitAccepted(120, 30*time.Second)
	e.stop()
	before := e.sim.Stats().Totals.Accepted
	if before >= n {
		t.Fatalf("everything was sent before the restart (%d); the test proves nothing", before)
	}
	e.start()
	if p := e.d.HeldPeak("acc"); p > window {
		t.Fatalf("the restarted queue loaded %d messages, over the window of %d", p, window)
	}
	e.waitAccepted(n, 60*time.Second)

	if got := checkOrder(t, e, "8101", seqOf, seqTos); got != len(seqOf) {
		t.Fatalf("accepted %d messages with a client_seq, want %d", got, len(seqOf))
	}
	for _, to := range plainTos {
		var got []string
		for _, m := range e.sim.Messages("8101", to) {
			got = append(got, m.CallbackData)
		}
		if !slices.Equal(got, plainOrder[to]) {
			t.Fatalf("recipient %s got %v, want %v", to, got, plainOrder[to])
		}
	}
	tot := e.sim.Stats().Totals
	if tot.Accepted != n || tot.Duplicates != 0 {
		t.Fatalf("simulator accepted %d with %d duplicates, want %d once each", tot.Accepted, tot.Duplicates, n)
	}
	if p := e.d.HeldPeak("acc"); p > window {
		t.Fatalf("the queue held %d messages in memory, over the window of %d", p, window)
	}
	testwait.For(t, "the queue depth back to 0", 10*time.Second, func() bool { return depthSum(e, "acc") == 0 })
}

// TestUrgentMessagesPassStoredBacklog: a paused account with a window of
// 20 holds 60 P1 messages, 40 of them in the store, when three P0 messages
// to new recipients arrive, and one P0 to a recipient whose P1 is among
// the stored. The P0s are loaded at once (the window grows by half for
// them) and are the first three sent; the fourth goes out right after its
// recipient's older P1, never before it. One send per second of a fake
// clock makes the order the dispatcher's, not the network's.
func TestUrgentMessagesPassStoredBacklog(t *testing.T) {
	const window = 20
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk, settings: map[string]string{"queue_window": fmt.Sprint(window)}})
	e.addAccount("acc", "8201", 1, 1, sim.Limits{Rate: 1000, Burst: 1000})
	coolDown(t, e, "acc", clk.Now().Add(time.Hour))

	var bulk []wamux.Message
	for i := range 60 {
		bulk = append(bulk, textMsg(t, admit.Request{AccountID: "acc", MsgID: fmt.Sprintf("bulk-%02d", i), To: fmt.Sprintf("1555830%04d", i)}))
	}
	e.submit(bulk...)
	testwait.For(t, "the bulk queued", 20*time.Second, func() bool { return depthSum(e, "acc") == 60 })
	urgent := []wamux.Message{
		textMsg(t, admit.Request{AccountID: "acc", MsgID: "urgent-0", Priority: "P0", To: "15558400000"}),
		textMsg(t, admit.Request{AccountID: "acc", MsgID: "urgent-1", Priority: "P0", To: "15558400001"}),
		textMsg(t, admit.Request{AccountID: "acc", MsgID: "urgent-2", Priority: "P0", To: "15558400002"}),
		textMsg(t, admit.Request{AccountID: "acc", MsgID: "behind-bulk-50", Priority: "P0", To: bulk[50].To}),
	}
	e.submit(urgent...)
	testwait.For(t, "the urgent messages queued", 20*time.Second, func() bool {
		d := e.d.QueueDepth("acc")
		return d[wamux.P0] == 4
	})

	awaitReactivated(t, reactivate(t, e))
	const n = 64
	for sent := int64(1); sent <= n; sent++ {
		testwait.For(t, fmt.Sprintf("send %d", sent), 20*time.Second, func() bool {
			return e.sim.Stats().Totals.Accepted >= sent && e.d.AttemptsRunning("acc") == 0
		})
		if sent < n {
			e.elapse(clk, pacedInterval(1))
		}
	}
	var order []string
	for _, m := range e.sim.Messages("8201", "") {
		order = append(order, m.CallbackData)
	}
	if len(order) != n {
		t.Fatalf("simulator accepted %d messages, want %d", len(order), n)
	}
	if first := order[:3]; !slices.Equal(first, []string{"urgent-0", "urgent-1", "urgent-2"}) {
		t.Fatalf("first sends %v, want the three P0 messages", first)
	}
	at := func(id string) int { return slices.Index(order, id) }
	if at("bulk-50") < 0 || at("behind-bulk-50") != at("bulk-50")+1 {
		t.Fatalf("bulk-50 sent at %d and the P0 behind it at %d, want right after it", at("bulk-50"), at("behind-bulk-50"))
	}
	if st := e.sim.Stats().Totals; st.Duplicates != 0 {
		t.Fatalf("%d duplicates", st.Duplicates)
	}
	if p := e.d.HeldPeak("acc"); p > window+window/2 {
		t.Fatalf("the queue held %d messages, over the window and its half (%d)", p, window+window/2)
	}
}

// TestRecipientMovesWithItsStoredMessages: a routed recipient has 20
// messages on its owner a, which is cooling down, 10 of them held in
// memory (queue_window 10) and 10 only in the store. When b becomes
// usable, the recipient's next message moves it there with all 20, those
// from the store too: left behind on a, they would go out after the newer
// ones. b sends the 21 in submission order, a none.
func TestRecipientMovesWithItsStoredMessages(t *testing.T) {
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk, settings: map[string]string{"queue_window": "10"}})
	e.addAccount("a", "8301", 1, 1, sim.Limits{Rate: 1000})
	e.addAccount("b", "8302", 1, 1, sim.Limits{Rate: 1000})
	setState(t, e, "b", wamux.AccountDisabled)
	coolDown(t, e, "a", clk.Now().Add(time.Hour))
	const to = "15558500000"
	var want []string
	var batch []wamux.Message
	for i := range 20 {
		m := textMsg(t, admit.Request{MsgID: fmt.Sprintf("x-%02d", i), To: to})
		batch = append(batch, m)
		want = append(want, m.ID)
	}
	for _, r := range e.submit(batch...) {
		if r.Message.AccountID != "a" {
			t.Fatalf("%s routed to %s, want a (b is disabled)", r.Message.ID, r.Message.AccountID)
		}
	}
	testwait.For(t, "20 messages queued on a", 20*time.Second, func() bool { return depthSum(e, "a") == 20 })
	if p := e.d.HeldPeak("a"); p != 10 {
		t.Fatalf("a holds %d messages in memory, want the window of 10 (the test needs some in the store)", p)
	}

	setState(t, e, "b", wamux.AccountActive)
	next := textMsg(t, admit.Request{MsgID: "x-20", To: to})
	if acc := e.submit(next)[0].Message.AccountID; acc != "b" {
		t.Fatalf("the recipient's next message went to %s, want b (a cools down)", acc)
	}
	want = append(want, next.ID)
	for _, id := range want {
		if acc := e.message(id).AccountID; acc != "b" {
			t.Fatalf("%s stayed on %s", id, acc)
		}
	}
	// b may have sent the first already: its bucket holds one token.
	testwait.For(t, "21 messages queued on b or sent", 20*time.Second, func() bool {
		return depthSum(e, "b")+int(e.sim.Stats().Totals.Accepted) == 21
	})

	for sent := int64(1); sent <= int64(len(want)); sent++ {
		testwait.For(t, fmt.Sprintf("send %d", sent), 20*time.Second, func() bool {
			return e.sim.Stats().Totals.Accepted >= sent && e.d.AttemptsRunning("b") == 0
		})
		e.elapse(clk, pacedInterval(1))
	}
	if got := sentFrom(e, "8302", to); !slices.Equal(got, want) {
		t.Fatalf("b sent %v, want %v", got, want)
	}
	if got := sentFrom(e, "8301", to); len(got) != 0 {
		t.Fatalf("a sent %v, want nothing", got)
	}
}

// TestAdmissionCountsTheStoredBacklog: with queue_max_depth 50 and a
// window of 10, a paused account takes 45 P1 messages (90 % of the bound)
// though it holds only 10 in memory, refuses the 46th with queue_full,
// and still takes a P0 from the reserve.
func TestAdmissionCountsTheStoredBacklog(t *testing.T) {
	e := newEnv(t, envOpts{settings: map[string]string{"queue_window": "10", "queue_max_depth": "50"}})
	e.addAccount("acc", "8401", 100, 10, sim.Limits{Rate: 1000})
	coolDown(t, e, "acc", time.Now().Add(time.Hour))
	var bulk []wamux.Message
	for i := range 45 {
		bulk = append(bulk, textMsg(t, admit.Request{AccountID: "acc", To: fmt.Sprintf("1555860%04d", i)}))
	}
	e.submit(bulk...)
	testwait.For(t, "45 queued", 20*time.Second, func() bool { return depthSum(e, "acc") == 45 })
	if p := e.d.HeldPeak("acc"); p > 10 {
		t.Fatalf("held %d in memory, over the window of 10", p)
	}
	res, err := e.d.Submit(context.Background(), []wamux.Message{
		textMsg(t, admit.Request{AccountID: "acc", To: "15558610000"}),
		textMsg(t, admit.Request{AccountID: "acc", To: "15558610001", Priority: "P0"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if code := wamux.ErrorCode(res[0].Err); code != wamux.EQueueFull {
		t.Fatalf("the 46th P1: error %v, want %s", res[0].Err, wamux.EQueueFull)
	}
	if res[1].Err != nil {
		t.Fatalf("a P0 within the reserve was refused: %v", res[1].Err)
	}
}

// TestDisabledAccountEvacuatesItsStoredBacklog: a disabled account's
// routed recipients move to b although only 10 of its 30 messages are in
// memory (queue_window 10): each move makes room, the next window loads,
// and its recipients move too, until b has sent all 30 once.
func TestDisabledAccountEvacuatesItsStoredBacklog(t *testing.T) {
	e := newEnv(t, envOpts{settings: map[string]string{"queue_window": "10"}})
	e.addAccount("a", "8501", 1000, 100, sim.Limits{Rate: 1000})
	e.addAccount("b", "8502", 1000, 100, sim.Limits{Rate: 1000})
	setState(t, e, "b", wamux.AccountDisabled)
	coolDown(t, e, "a", time.Now().Add(time.Hour))
	var batch []wamux.Message
	for i := range 30 {
		batch = append(batch, textMsg(t, admit.Request{MsgID: fmt.Sprintf("e-%02d", i), To: fmt.Sprintf("1555870%04d", i)}))
	}
	e.submit(batch...)
	testwait.For(t, "30 messages queued on a", 20*time.Second, func() bool { return depthSum(e, "a") == 30 })
	setState(t, e, "b", wamux.AccountActive)
	setState(t, e, "a", wamux.AccountDisabled)
	e.waitAccepted(30, 30*time.Second)
	if got := sentFrom(e, "8501", ""); len(got) != 0 {
		t.Fatalf("the disabled account sent %v", got)
	}
	if tot := e.sim.Stats().Totals; tot.Accepted != 30 || tot.Duplicates != 0 {
		t.Fatalf("accepted %d with %d duplicates, want 30 once each", tot.Accepted, tot.Duplicates)
	}
	testwait.For(t, "a's queue empty", 10*time.Second, func() bool { return depthSum(e, "a") == 0 })
	if p := e.d.HeldPeak("a"); p > 10 {
		t.Fatalf("a held %d in memory, over the window of 10", p)
	}
}

// TestFailedMoveOfStoredMessageKeepsRecipientOrder: a is disabled with 20
// of a routed recipient's messages, 10 held in memory (queue_window 10)
// and 10 only in the store, and the write moving x-15, one of the latter,
// to b fails once. The move is all or nothing, those from the store too:
// the recipient's next message moves all 20 ahead of it, and b sends the
// 21 in submission order.
func TestFailedMoveOfStoredMessageKeepsRecipientOrder(t *testing.T) {
	fs := &flakyStore{}
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk, wrapStore: fs.wrap, settings: map[string]string{"queue_window": "10"}})
	const to = "15558800000"
	var msgs []wamux.Message
	var want []string
	for i := range 20 {
		msgs = append(msgs, textMsg(t, admit.Request{MsgID: fmt.Sprintf("x-%02d", i), To: to}))
		want = append(want, msgs[i].ID)
	}
	queuedOnPausedPool(t, e, clk, msgs...)
	if p := e.d.HeldPeak("a"); p != 10 {
		t.Fatalf("a holds %d messages in memory, want the window of 10", p)
	}
	fs.failNext(1, false, func(u store.MessageUpdate) bool { return u.MsgID == "x-15" && u.AccountID == "b" })
	setState(t, e, "b", wamux.AccountActive)
	setState(t, e, "a", wamux.AccountDisabled)
	testwait.For(t, "the move of x-15 failed", 10*time.Second, func() bool { return fs.failed.Load() == 1 })
	next := textMsg(t, admit.Request{MsgID: "x-20", To: to})
	if acc := e.submit(next)[0].Message.AccountID; acc != "b" {
		t.Fatalf("the next message went to %s, want b", acc)
	}
	want = append(want, next.ID)
	testwait.For(t, "all 21 sent", 20*time.Second, func() bool {
		e.elapse(clk, time.Second)
		return e.sim.Stats().Totals.Accepted >= int64(len(want))
	})
	if got := sentFrom(e, "8102", to); !slices.Equal(got, want) {
		t.Fatalf("b sent %v, want %v", got, want)
	}
}
