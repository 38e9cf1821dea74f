package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/sqlite"
	"github.com/wamux/wamux/store/storetest"
)

func newStore(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "data", "wamux.db"), sqlite.Options{})
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
