package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/testwait"
)

func openInternal(t testing.TB) *Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "w.db"), Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	filterReady(t, s)
	return s
}

// filterReady waits for the scan of the message key index into its
// filter, so that numbering relies on the filter from then on.
func filterReady(t testing.TB, s *Store) {
	t.Helper()
	<-s.loaded
	if !s.filter.ready.Load() {
		t.Fatal("the key filter did not load")
	}
}

// blockWriter parks the writer inside a request until the returned release
// is called, so the test can queue requests that will share one batch.
func blockWriter(t *testing.T, s *Store) (release func(), done <-chan error) {
	t.Helper()
	started, gate := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- s.write(context.Background(), func(w *writeTx) error {
			close(started)
			<-gate
			_, err := w.exec(`INSERT INTO settings (key, value, updated_at) VALUES ('blocker', 'x', 0)`)
			return err
		})
	}()
	<-started
	return func() { close(gate) }, errc
}

// failInSharedBatch runs fn, which must fail with errBoom, in one
// transaction with another request that succeeds (the blocker holds the
// writer until both are queued): fn is rolled back to its savepoint only.
func failInSharedBatch(t *testing.T, s *Store, fn func(w *writeTx) error, errBoom error) {
	t.Helper()
	release, blockerDone := blockWriter(t, s)
	failed := enqueue(s, fn)
	other := enqueue(s, setting("other"))
	release()
	if err := <-blockerDone; err != nil {
		t.Fatalf("blocker: %v", err)
	}
	if err := <-failed.done; !errors.Is(err, errBoom) {
		t.Fatalf("failed request: %v, want its own error", err)
	}
	if err := <-other.done; err != nil {
		t.Fatalf("other request: %v", err)
	}
}

// openSecond opens another store on s's file, as a second process would,
// with its key filter loaded.
func openSecond(t *testing.T, s *Store) *Store {
	t.Helper()
	b, err := Open(t.Context(), s.path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	filterReady(t, b)
	return b
}

func enqueue(s *Store, fn func(w *writeTx) error) *request {
	r := &request{ctx: context.Background(), fn: fn, done: make(chan error, 1)}
	s.reqs <- r
	return r
}

func setting(key string) func(w *writeTx) error {
	return func(w *writeTx) error {
		_, err := w.exec(`INSERT INTO settings (key, value, updated_at) VALUES (?, 'v', 0)`, key)
		return err
	}
}

// TestSavepointIsolatesFailure queues three requests into one batch; the
// middle one writes and then fails. Its write must vanish while its
// neighbours commit.
func TestSavepointIsolatesFailure(t *testing.T) {
	s := openInternal(t)
	release, blockerDone := blockWriter(t, s)
	errBoom := wamux.Errorf(wamux.EConflict, "boom")
	a := enqueue(s, setting("a"))
	b := enqueue(s, func(w *writeTx) error {
		if err := setting("b")(w); err != nil {
			return err
		}
		return errBoom
	})
	p := enqueue(s, func(*writeTx) error { panic("bad request") })
	c := enqueue(s, setting("c"))
	release()
	if err := <-blockerDone; err != nil {
		t.Fatalf("blocker: %v", err)
	}
	if err := <-a.done; err != nil {
		t.Fatalf("a: %v", err)
	}
	if err := <-b.done; !errors.Is(err, errBoom) {
		t.Fatalf("b: %v, want its own error", err)
	}
	if err := <-p.done; err == nil {
		t.Fatal("panicking request reported success")
	}
	if err := <-c.done; err != nil {
		t.Fatalf("c: %v", err)
	}
	got, err := s.Settings(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got["a"] != "v" || got["c"] != "v" || got["blocker"] != "x" {
		t.Fatalf("settings = %v, want blocker, a and c only", got)
	}
}

// TestCloseDrains checks that writes queued before Close are committed and
// answered, and that writes after Close are refused as unavailable.
func TestCloseDrains(t *testing.T) {
	s := openInternal(t)
	release, blockerDone := blockWriter(t, s)
	queued := []*request{enqueue(s, setting("x")), enqueue(s, setting("y"))}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	release()
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := <-blockerDone; err != nil {
		t.Fatalf("blocker: %v", err)
	}
	for i, r := range queued {
		if err := <-r.done; err != nil {
			t.Fatalf("queued write %d: %v", i, err)
		}
	}
	err := s.PutSettings(t.Context(), map[string]string{"z": "1"})
	if wamux.ErrorCode(err) != wamux.EUnavailable {
		t.Fatalf("write after close: %v, want unavailable", err)
	}
	s2, err := Open(t.Context(), s.path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got, err := s2.Settings(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got["x"] != "v" || got["y"] != "v" || got["blocker"] != "x" || len(got) != 3 {
		t.Fatalf("after reopen settings = %v", got)
	}
}

// TestCanceledCallerIsSkipped: a request whose context ended before the
// writer reached it must not be applied.
func TestCanceledCallerIsSkipped(t *testing.T) {
	s := openInternal(t)
	release, blockerDone := blockWriter(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	r := &request{ctx: ctx, fn: setting("late"), done: make(chan error, 1)}
	s.reqs <- r
	cancel()
	release()
	<-blockerDone
	if err := <-r.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled request: %v, want context.Canceled", err)
	}
	got, err := s.Settings(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["late"]; ok {
		t.Fatal("canceled request was applied")
	}
}

func TestDeadlineIsRecognisable(t *testing.T) {
	s := openInternal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	err := s.PutSettings(ctx, map[string]string{"k": "v"})
	if !errors.Is(err, context.DeadlineExceeded) || wamux.ErrorCode(err) != wamux.EUnavailable {
		t.Fatalf("expired context: %v (code %s)", err, wamux.ErrorCode(err))
	}
	_, err = s.GetAccount(ctx, "x")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read with expired context: %v", err)
	}
}

// TestCloseStopsPacedCheckpointer: the checkpointer waits a whole
// CheckpointEvery after each checkpoint; Close must not wait for that.
func TestCloseStopsPacedCheckpointer(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "c.db"), Options{CheckpointEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := s.PutSettings(t.Context(), map[string]string{"k": strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(t.Context(), s.path, Options{CheckpointEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got, err := s2.Settings(t.Context())
	if err != nil || got["k"] != "2" {
		t.Fatalf("after reopen: %v, %v", got, err)
	}
}

// TestCallerCanceledWhileQueued: a caller whose context ends while its
// request waits behind a busy writer gets the context's error, and its
// write is not applied.
func TestCallerCanceledWhileQueued(t *testing.T) {
	s := openInternal(t)
	release, blockerDone := blockWriter(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.PutSettings(ctx, map[string]string{"queued": "v"}) }()
	// The request is queued once it sits in the channel.
	testwait.For(t, "the request to queue", 10*time.Second, func() bool { return len(s.reqs) > 0 })
	cancel()
	release()
	if err := <-blockerDone; err != nil {
		t.Fatalf("blocker: %v", err)
	}
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled caller: %v, want context.Canceled", err)
	}
	got, err := s.Settings(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["queued"]; ok {
		t.Fatal("write of a canceled caller was applied")
	}
}

// The writer lingers only while busy, stops after lingers that gathered
// nobody (a lone caller must not pay the wait on every write), and
// starts again once requests share batches by themselves.
func TestGroupingLingersOnlyWhenItPays(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	g := grouping{wait: 500 * time.Microsecond}
	if g.linger(t0) {
		t.Fatal("lingered before any commit")
	}
	g.committed(t0, 3, false)
	if !g.linger(t0.Add(time.Millisecond)) {
		t.Fatal("did not linger right after a shared commit")
	}
	if g.linger(t0.Add(groupBusy)) {
		t.Fatal("lingered although the writer had been idle for groupBusy")
	}
	now := t0
	for i := 0; i < groupGiveUp; i++ {
		if !g.linger(now) {
			t.Fatalf("gave up after %d fruitless lingers, want %d", i, groupGiveUp)
		}
		g.committed(now, 1, true)
	}
	if g.linger(now) {
		t.Fatalf("still lingering after %d fruitless lingers", groupGiveUp)
	}
	g.committed(now, 1, false) // a lone caller's write: still off
	if g.linger(now) {
		t.Fatal("lone writes turned lingering back on")
	}
	g.committed(now, 2, false) // two callers shared a commit unaided
	if !g.linger(now) {
		t.Fatal("did not linger again once requests shared a batch")
	}
	off := grouping{wait: -1}
	off.committed(t0, 5, false)
	if off.linger(t0) {
		t.Fatal("lingered with GroupWait turned off")
	}
}

// A transaction whose catch-up with another process's ledger rows fails
// leaves the catch-up to the next one, although data_version has not
// moved since: otherwise this store would number the other process's new
// message a second time.
func TestFailedCatchUpIsRetried(t *testing.T) {
	a := openInternal(t)
	b := openSecond(t, a)
	ctx := t.Context()
	injected := errors.New("injected catch-up failure")
	if err := a.write(ctx, func(w *writeTx) error { w.catchUpFault = injected; return nil }); err != nil {
		t.Fatal(err)
	}
	at := time.UnixMilli(1_750_000_000_000)
	m := wamux.Receipt{MessageID: "wamid.M", AccountID: "acc1", Type: wamux.ReceiptSent, EventTime: at}
	if _, err := b.InsertReceipts(ctx, []wamux.Receipt{m}); err != nil {
		t.Fatal(err)
	}
	other := wamux.Receipt{MessageID: "wamid.N", AccountID: "acc1", Type: wamux.ReceiptSent, EventTime: at}
	if _, err := a.InsertReceipts(ctx, []wamux.Receipt{other}); !errors.Is(err, injected) {
		t.Fatalf("write during the failed catch-up: %v, want the injected error", err)
	}
	m.Type = wamux.ReceiptDelivered
	if _, err := a.InsertReceipts(ctx, []wamux.Receipt{m}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := a.rdb.QueryRowContext(ctx, `SELECT count(*) FROM message_keys WHERE account_id = ? AND message_id = ?`,
		m.AccountID, m.MessageID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%s numbered %d times", m.MessageID, n)
	}
}
