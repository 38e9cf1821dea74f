package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wamux/wamux"
)

// blockSync makes the store's WAL fsync report each call on started and
// wait for release; it returns what fail says (nil: the real fsync).
func blockSync(t *testing.T, s *Store, fail func() error) (started chan string, release chan struct{}) {
	t.Helper()
	started, release = make(chan string, 16), make(chan struct{})
	s.wal.sync = func(f *os.File) error {
		started <- f.Name()
		<-release
		if err := fail(); err != nil {
			return err
		}
		return syncData(f)
	}
	return started, release
}

// syncData flushes a file it can and reports the failure on one it
// cannot (a closed descriptor), so a failed flush is never taken for a
// durable WAL.
// drainSyncs takes the fsync reports nobody waits for any more, until the
// test ends; the store's Close runs after that, and its last fsyncs fit in
// started's buffer.
func drainSyncs(t *testing.T, started <-chan string) {
	t.Helper()
	end := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-started:
			case <-end:
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(end)
		<-exited
	})
}

func TestSyncDataReportsFailure(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "x-wal"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("frame")); err != nil {
		t.Fatal(err)
	}
	if err := syncData(f); err != nil {
		t.Fatalf("sync of an open file: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syncData(f); err == nil {
		t.Fatal("sync of a closed file reported success")
	}
	// An open descriptor that cannot be flushed: the call's own error.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err := syncData(r); err == nil {
		t.Fatal("sync of a pipe reported success")
	}
}

func walReceipts(n int) []wamux.Receipt {
	rs := make([]wamux.Receipt, n)
	for i := range rs {
		rs[i] = wamux.Receipt{MessageID: "wamid.w" + string(rune('a'+i)), AccountID: "acc1", Type: wamux.ReceiptSent,
			EventTime: time.UnixMilli(1_750_000_000_000)}
	}
	return rs
}

// A receipt pipeline write is committed without waiting for the fsync,
// and its caller is answered only after the syncer's fsync of the WAL
// file; meanwhile other writes commit durable by themselves and are
// answered at once.
func TestDeferredWritesAnsweredAfterTheWALSync(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	started, release := blockSync(t, s, func() error { return nil })

	done := make(chan error, 1)
	go func() {
		_, err := s.AppendReceiptLog(ctx, walReceipts(3))
		done <- err
	}()
	var name string
	select {
	case name = <-started:
	case err := <-done:
		t.Fatalf("the log append was answered (%v) without a WAL fsync", err)
	}
	if want := s.path + "-wal"; name != want {
		t.Fatalf("fsync of %q, want the WAL %q", name, want)
	}
	select {
	case err := <-done:
		t.Fatalf("the log append was answered (%v) before its fsync ended", err)
	default:
	}
	// Committed already: a reader sees it while the fsync is pending.
	ls, err := s.ListReceiptLog(ctx, 0, 10)
	if err != nil || len(ls) != 3 {
		t.Fatalf("log read during the fsync: %d entries, %v", len(ls), err)
	}
	// A write outside the pipeline does not wait for the syncer (which
	// waits until release: without an answer in 10 s, it did).
	created := make(chan error, 1)
	go func() {
		_, err := s.CreateAccount(ctx, wamux.Account{ID: "accW", PhoneNumberID: "1001", AccessToken: "t",
			BaseURL: wamux.DefaultBaseURL, RatePerSec: 80, Burst: 80, State: wamux.AccountActive})
		created <- err
	}()
	select {
	case err := <-created:
		if err != nil {
			t.Fatalf("create account while the syncer waits: %v", err)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("create account waited for the syncer's fsync")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("log append: %v", err)
	}
	if _, err := s.InsertReceipts(ctx, walReceipts(2)); err != nil {
		t.Fatalf("insert receipts: %v", err)
	}
}

// When the fsync fails, the callers of the batches it was to cover get an
// error, and so do later deferred writes, though the next fsync would
// succeed: the kernel may have dropped the pages that failed, so no later
// answer could be trusted. Other writes go on.
func TestDeferredWriteFailsWhenTheWALSyncFails(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	errDisk := errors.New("disk gone")
	failing := true
	started, release := blockSync(t, s, func() error {
		if failing {
			return errDisk
		}
		return nil
	})
	close(release)
	drainSyncs(t, started)
	if _, err := s.AppendReceiptLog(ctx, walReceipts(1)); !errors.Is(err, errDisk) {
		t.Fatalf("append with a failing fsync: %v, want %v", err, errDisk)
	}
	failing = false
	if _, err := s.AppendReceiptLog(ctx, walReceipts(2)); !errors.Is(err, errDisk) {
		t.Fatalf("append after a failed fsync: %v, want %v still", err, errDisk)
	}
	if _, err := s.CreateAccount(ctx, wamux.Account{ID: "accF", PhoneNumberID: "1002", AccessToken: "t",
		BaseURL: wamux.DefaultBaseURL, RatePerSec: 80, Burst: 80, State: wamux.AccountActive}); err != nil {
		t.Fatalf("create account after a failed WAL fsync: %v", err)
	}
	// Merges, which need no fsync of their own, fail too from now on.
	if _, err := s.InsertReceipts(ctx, walReceipts(1)); !errors.Is(err, errDisk) {
		t.Fatalf("insert receipts after a failed fsync: %v, want %v", err, errDisk)
	}
}

// The pipeline's merges and log acks are answered once committed, while
// the log append before them still waits for its fsync.
func TestOrderedWritesAnsweredAtCommit(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	started, release := blockSync(t, s, func() error { return nil })
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	appended := make(chan error, 1)
	var ids []int64
	go func() {
		var err error
		ids, err = s.AppendReceiptLog(ctx, walReceipts(3))
		appended <- err
	}()
	<-started // the append is committed; its fsync waits for release
	ordered := make(chan error, 1)
	go func() {
		fresh, err := s.InsertReceipts(ctx, walReceipts(3))
		if err == nil && len(fresh) != 3 {
			err = fmt.Errorf("%d results for 3 receipts", len(fresh))
		}
		ordered <- err
	}()
	select {
	case err := <-ordered:
		if err != nil {
			t.Fatalf("insert receipts: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("insert receipts waited for the WAL fsync")
	}
	select {
	case err := <-appended:
		t.Fatalf("the log append was answered (%v) before its fsync", err)
	default:
	}
	close(release)
	if err := <-appended; err != nil {
		t.Fatalf("log append: %v", err)
	}
	// The ack's commit comes after the append's fsync here, so nothing
	// blocks it; what this shows is that it is answered without one more.
	drainSyncs(t, started)
	if n, err := s.AckReceiptLog(ctx, ids); err != nil || n != 3 {
		t.Fatalf("ack: %d, %v; want 3", n, err)
	}
}

// answer routes a committed batch: with synchronous=FULL everyone at once;
// otherwise ordered requests at once and the rest through the syncer, and
// after a failed fsync everyone through the syncer.
func TestAnswerRoutesByKind(t *testing.T) {
	for _, c := range []struct {
		name                 string
		full, failed         bool
		orderedNow, deferNow bool
	}{
		{"normal", false, false, true, false},
		{"full", true, false, true, true},
		{"after a failed fsync", false, true, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Store{}
			s.syncFailed.Store(c.failed)
			ordered := &request{ordered: true, done: make(chan error, 1)}
			deferred := &request{deferSync: true, done: make(chan error, 1)}
			syncs := make(chan syncBatch, 1)
			s.answer(&writeTx{full: c.full}, []*request{deferred, ordered}, []error{nil, nil}, syncs)
			if got := len(ordered.done) == 1; got != c.orderedNow {
				t.Errorf("ordered answered at once: %v, want %v", got, c.orderedNow)
			}
			if got := len(deferred.done) == 1; got != c.deferNow {
				t.Errorf("deferred answered at once: %v, want %v", got, c.deferNow)
			}
			var toSyncer int
			select {
			case b := <-syncs:
				toSyncer = len(b.reqs)
			default:
			}
			if want := 2 - btoi(c.orderedNow) - btoi(c.deferNow); toSyncer != want {
				t.Errorf("%d requests to the syncer, want %d", toSyncer, want)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// syncFor commits a batch with synchronous=NORMAL only when every request
// in it defers its fsync or needs none, and with FULL otherwise.
func TestSyncModeFollowsTheBatch(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "m.db")+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	w := &writeTx{conn: conn, full: true}
	mode := func() int {
		var m int
		if err := conn.QueryRowContext(t.Context(), "PRAGMA synchronous").Scan(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	deferred, full, ordered := &request{deferSync: true}, &request{}, &request{ordered: true}
	for i, c := range []struct {
		batch []*request
		full  bool
		mode  int // 1 NORMAL, 2 FULL
	}{
		{[]*request{deferred, full}, true, 2},
		{[]*request{deferred, deferred}, false, 1},
		{[]*request{deferred}, false, 1},
		{[]*request{full, deferred}, true, 2},
		{[]*request{ordered, deferred}, false, 1},
		{[]*request{ordered, full}, true, 2},
		{[]*request{ordered}, false, 1},
	} {
		w.syncFor(c.batch)
		if w.full != c.full || mode() != c.mode {
			t.Fatalf("batch %d: full %v, synchronous %d; want %v, %d", i, w.full, mode(), c.full, c.mode)
		}
	}
}
