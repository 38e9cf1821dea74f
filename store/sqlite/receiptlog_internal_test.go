package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// awkward holds strings the hand-written JSON encoder must escape.
var awkward = []string{"", `"quoted"`, `back\slash`, "tab\tnew\nline\r", "\x00\x01\x1f", "ünïcödé ✓ 𝄞", "</script>&"}

func logReceipt(i int) wamux.Receipt {
	s := awkward[i%len(awkward)]
	return wamux.Receipt{MessageID: "wamid." + s, AccountID: "acc" + s, Type: wamux.ReceiptDelivered,
		EventTime: time.UnixMilli(1_700_000_000_000 + int64(i)).UTC(), CallbackData: s, Recipient: "15550001",
		ErrorCode: 131000 + i, ErrorTitle: s, Source: "webhook", ReceivedAt: time.UnixMilli(1_700_000_001_000).UTC()}
}

// TestLogAcksAcrossRestart: acknowledgements live in memory, so after a
// restart an entry that was partly acknowledged is listed whole (processing
// it again is harmless); acknowledging it fully then deletes it.
func TestLogAcksAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	ctx := t.Context()
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rs := []wamux.Receipt{logReceipt(0), logReceipt(1), logReceipt(2)}
	ids, err := s.AppendReceiptLog(ctx, rs)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.AckReceiptLog(ctx, ids[:1]); err != nil || n != 1 {
		t.Fatalf("ack = %d, %v; want 1", n, err)
	}
	if got := listLog(t, s); len(got) != 2 || got[0].ID != ids[1] {
		t.Fatalf("log = %+v, want the two receipts not acknowledged", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	got := listLog(t, s)
	if len(got) != 3 {
		t.Fatalf("after restart the log lists %d receipts, want the whole entry (3)", len(got))
	}
	for i := range got {
		if got[i].ID != ids[i] || got[i].Receipt != rs[i] {
			t.Fatalf("log[%d] = %+v, want id %d %+v", i, got[i], ids[i], rs[i])
		}
	}
	if n, err := s.AckReceiptLog(ctx, append(ids, ids[0])); err != nil || n != 3 {
		t.Fatalf("ack after restart = %d, %v; want 3", n, err)
	}
	if n := countRows(t, s, "receipt_log_entries"); n != 0 {
		t.Fatalf("%d entries left after every receipt was acknowledged", n)
	}
}

// TestLogMigratesRowsPerReceipt: receipts waiting in the log of the
// per-receipt layout (before migration 0070) come out of the new one
// unchanged, in order, and can be acknowledged.
func TestLogMigratesRowsPerReceipt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	ctx := t.Context()
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Put the file back to the layout before 0070, holding three receipts.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, `DROP TABLE receipt_log_entries`)
	mustExec(t, db, `DELETE FROM schema_migrations WHERE version = 70`)
	mustExec(t, db, `CREATE TABLE receipt_log (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT NOT NULL,
		account_id TEXT NOT NULL, receipt_type TEXT NOT NULL, event_time INTEGER NOT NULL, callback_data TEXT NOT NULL,
		recipient TEXT NOT NULL, error_code INTEGER NOT NULL, error_title TEXT NOT NULL, source TEXT NOT NULL,
		received_at INTEGER NOT NULL)`)
	var rs []wamux.Receipt
	for i, id := range []int64{7, 8, 12} {
		r := logReceipt(i + 3)
		rs = append(rs, r)
		mustExec(t, db, `INSERT INTO receipt_log VALUES (?,?,?,?,?,?,?,?,?,?,?)`, id, r.MessageID, r.AccountID,
			string(r.Type), ms(r.EventTime), r.CallbackData, r.Recipient, r.ErrorCode, r.ErrorTitle, r.Source, ms(r.ReceivedAt))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("open with the old log: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	got := listLog(t, s)
	if len(got) != len(rs) {
		t.Fatalf("migrated log lists %d receipts, want %d", len(got), len(rs))
	}
	for i := range rs {
		if got[i].Receipt != rs[i] || (i > 0 && got[i].ID <= got[i-1].ID) {
			t.Fatalf("migrated log[%d] = %+v, want %+v in order", i, got[i], rs[i])
		}
	}
	ids, err := s.AppendReceiptLog(ctx, []wamux.Receipt{logReceipt(0)})
	if err != nil {
		t.Fatal(err)
	}
	if ids[0] <= got[len(got)-1].ID {
		t.Fatalf("new id %d not after the migrated ones (last %d)", ids[0], got[len(got)-1].ID)
	}
	if n, err := s.AckReceiptLog(ctx, []int64{got[0].ID, got[1].ID, got[2].ID}); err != nil || n != 3 {
		t.Fatalf("ack of migrated receipts = %d, %v; want 3", n, err)
	}
	if left := listLog(t, s); len(left) != 1 || left[0].ID != ids[0] {
		t.Fatalf("log after ack = %+v, want only the new receipt", left)
	}
}

func listLog(t *testing.T, s *Store) []store.LoggedReceipt {
	t.Helper()
	got, err := s.ListReceiptLog(context.Background(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func countRows(t *testing.T, s *Store, table string) int {
	t.Helper()
	var n int
	if err := s.rdb.QueryRowContext(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
