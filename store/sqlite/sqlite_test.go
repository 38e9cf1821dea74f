package sqlite_test

import (
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/sqlite"
	"github.com/wamux/wamux/store/storetest"
)

func newStore(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "data", "wamux.db"), sqlite.Options{Sealer: storetest.NewKeyring(t)})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t) })
}

func TestSealing(t *testing.T) {
	storetest.RunSealing(t, func(t *testing.T) storetest.Sealing {
		path := filepath.Join(t.TempDir(), "wamux.db")
		return storetest.Sealing{
			Open: func(t *testing.T, sealer store.Sealer) (store.Store, error) {
				return sqlite.Open(t.Context(), path, sqlite.Options{Sealer: sealer})
			},
			RawToken: func(t *testing.T, id string) string {
				db, err := sql.Open("sqlite", path+"?mode=ro")
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				var tok string
				if err := db.QueryRow(`SELECT access_token FROM accounts WHERE id = ?`, id).Scan(&tok); err != nil {
					t.Fatalf("read token of %s: %v", id, err)
				}
				return tok
			},
			Files: func(t *testing.T) []byte {
				var all []byte
				for _, suffix := range []string{"", "-wal", "-shm"} {
					b, err := os.ReadFile(path + suffix)
					if err != nil && !errors.Is(err, fs.ErrNotExist) {
						t.Fatal(err)
					}
					all = append(all, b...)
				}
				return all
			},
		}
	})
}

func TestLog(t *testing.T) {
	storetest.RunLog(t, func(t *testing.T) storetest.Reopener {
		path := filepath.Join(t.TempDir(), "wamux.db")
		return storetest.Reopener{
			Open: func(t *testing.T) store.Store {
				s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				return s
			},
			PreEntries: func(t *testing.T, ids []int64, rs []wamux.Receipt) {
				db, err := sql.Open("sqlite", path)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				exec := func(q string, args ...any) {
					t.Helper()
					if _, err := db.Exec(q, args...); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
				}
				exec(`DROP TABLE receipt_log_entries`)
				exec(`DELETE FROM schema_migrations WHERE version = 70`)
				exec(`CREATE TABLE receipt_log (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT NOT NULL,
					account_id TEXT NOT NULL, receipt_type TEXT NOT NULL, event_time INTEGER NOT NULL,
					callback_data TEXT NOT NULL, recipient TEXT NOT NULL, error_code INTEGER NOT NULL,
					error_title TEXT NOT NULL, source TEXT NOT NULL, received_at INTEGER NOT NULL)`)
				for i, r := range rs {
					exec(`INSERT INTO receipt_log VALUES (?,?,?,?,?,?,?,?,?,?,?)`, ids[i], r.MessageID, r.AccountID,
						string(r.Type), r.EventTime.UnixMilli(), r.CallbackData, r.Recipient, r.ErrorCode, r.ErrorTitle,
						r.Source, r.ReceivedAt.UnixMilli())
				}
			},
		}
	})
}

// Migration 0080 moves receipts and merged states from their two tables
// into message_receipts, 0090 files that table's rows under message
// numbers, and 0100 moves those numbers into a ledger and an index; a
// data dir written before all three must read the same afterwards (all
// through the index: the tail starts empty), and a receipt stored before
// must still count as stored.
func TestMigrateMessageReceipts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wamux.db")
	s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DROP TABLE message_receipts`,
		`DROP TABLE message_keys`,
		`DROP TABLE message_key_index`,
		`DROP TABLE message_key_index_state`,
		`DELETE FROM schema_migrations WHERE version IN (80, 90, 100, 110)`,
		`CREATE TABLE receipts (message_id TEXT NOT NULL, account_id TEXT NOT NULL, receipt_type TEXT NOT NULL,
			event_time INTEGER NOT NULL, callback_data TEXT NOT NULL, recipient TEXT NOT NULL, error_code INTEGER NOT NULL,
			error_title TEXT NOT NULL, source TEXT NOT NULL, received_at INTEGER NOT NULL,
			PRIMARY KEY (message_id, account_id, receipt_type)) WITHOUT ROWID`,
		`CREATE TABLE message_states (account_id TEXT NOT NULL, message_id TEXT NOT NULL, type TEXT NOT NULL,
			event_time INTEGER NOT NULL, error_code INTEGER NOT NULL, updated_at INTEGER NOT NULL,
			PRIMARY KEY (account_id, message_id)) WITHOUT ROWID`,
		`INSERT INTO receipts VALUES ('wamid.A', 'acc1', 'sent', 1000, 'msg-1', '15550001', 0, '', 'webhook', 1100),
			('wamid.A', 'acc1', 'failed', 2000, 'msg-1', '15550001', 131026, 'undeliverable', 'webhook', 2100),
			('wamid.B', 'acc2', 'read', 3000, '', '15550002', 0, '', 'agent', 3100)`,
		`INSERT INTO message_states VALUES ('acc1', 'wamid.A', 'failed', 2000, 131026, 2200),
			('acc2', 'wamid.B', 'read', 3000, 0, 3200)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	ctx := t.Context()
	rs, err := s.ListReceipts(ctx, "acc1", "wamid.A")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Type != wamux.ReceiptSent || rs[1].Type != wamux.ReceiptFailed || rs[1].ErrorCode != 131026 ||
		rs[1].ErrorTitle != "undeliverable" || rs[1].CallbackData != "msg-1" || rs[1].Recipient != "15550001" ||
		rs[1].Source != "webhook" || rs[1].EventTime.UnixMilli() != 2000 || rs[1].ReceivedAt.UnixMilli() != 2100 {
		t.Fatalf("receipts of wamid.A after the migration: %+v", rs)
	}
	states, err := s.GetStates(ctx, []store.StateKey{{AccountID: "acc1", MessageID: "wamid.A"}, {AccountID: "acc2", MessageID: "wamid.B"}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := states[store.StateKey{AccountID: "acc1", MessageID: "wamid.A"}], states[store.StateKey{AccountID: "acc2", MessageID: "wamid.B"}]
	if len(states) != 2 || a.Type != wamux.ReceiptFailed || a.ErrorCode != 131026 || a.EventTime.UnixMilli() != 2000 ||
		a.UpdatedAt.UnixMilli() != 2200 || b.Type != wamux.ReceiptRead || b.UpdatedAt.UnixMilli() != 3200 {
		t.Fatalf("states after the migration: %+v", states)
	}
	has, err := s.HasReceipts(ctx, []store.ReceiptKey{{MessageID: "wamid.B", AccountID: "acc2", Type: wamux.ReceiptRead},
		{MessageID: "wamid.B", AccountID: "acc2", Type: wamux.ReceiptSent}, {MessageID: "wamid.B", AccountID: "acc2"}})
	if err != nil {
		t.Fatal(err)
	}
	if !has[0] || has[1] || has[2] {
		t.Fatalf("HasReceipts after the migration = %v, want [true false false] (a state row is not a receipt)", has)
	}
	fresh, err := s.InsertReceipts(ctx, []wamux.Receipt{{MessageID: "wamid.B", AccountID: "acc2", Type: wamux.ReceiptRead, EventTime: time.UnixMilli(3000)},
		{MessageID: "wamid.B", AccountID: "acc2", Type: wamux.ReceiptDelivered, EventTime: time.UnixMilli(2500)}})
	if err != nil {
		t.Fatal(err)
	}
	if fresh[0] || !fresh[1] {
		t.Fatalf("InsertReceipts after the migration = %v, want [false true]", fresh)
	}
	if rs, err := s.ListReceipts(ctx, "acc2", "wamid.B"); err != nil || len(rs) != 2 {
		t.Fatalf("receipts of wamid.B = %+v, %v; want delivered and read, not the state row", rs, err)
	}
	if _, err := s.InsertReceipts(ctx, []wamux.Receipt{{MessageID: "wamid.0", AccountID: "acc1", Type: wamux.ReceiptSent,
		EventTime: time.UnixMilli(4000)}}); err != nil {
		t.Fatal(err)
	}
	// Migration 0090 numbers the messages it finds by their first stamp;
	// a message seen later gets the next number, whatever its id.
	var order []string
	db, err = sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT message_id FROM message_keys ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		order = append(order, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"wamid.A", "wamid.B", "wamid.0"}; !slices.Equal(order, want) {
		t.Fatalf("messages by number = %v, want %v", order, want)
	}
}

func TestEdgeCases(t *testing.T) {
	storetest.RunEdgeCases(t, func(t *testing.T) store.Store { return newStore(t) })
}
