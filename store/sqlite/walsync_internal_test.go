package sqlite

import (
	"database/sql"
	"errors"
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
	go func() {
		for range started {
		}
	}()
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
}

// syncFor commits a batch with synchronous=NORMAL only when every request
// in it defers its fsync, and with FULL otherwise.
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
	deferred, full := &request{deferSync: true}, &request{}
	for i, c := range []struct {
		batch []*request
		full  bool
		mode  int // 1 NORMAL, 2 FULL
	}{
		{[]*request{deferred, full}, true, 2},
		{[]*request{deferred, deferred}, false, 1},
		{[]*request{deferred}, false, 1},
		{[]*request{full, deferred}, true, 2},
	} {
		w.syncFor(c.batch)
		if w.full != c.full || mode() != c.mode {
			t.Fatalf("batch %d: full %v, synchronous %d; want %v, %d", i, w.full, mode(), c.full, c.mode)
		}
	}
}
