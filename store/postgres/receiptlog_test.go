package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/postgres"
	"github.com/wamux/wamux/store/storetest"
)

// TestLog runs the receipt-log tests that reopen a store's data on one
// schema, dropped when each test ends.
func TestLog(t *testing.T) {
	testDSN(t)
	storetest.RunLog(t, func(t *testing.T) storetest.Reopener {
		dsn, schema := testDSN(t), randomSchema(t)
		conn := func(t *testing.T) *pgx.Conn {
			t.Helper()
			cfg, err := pgx.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			cfg.RuntimeParams["search_path"] = schema
			c, err := pgx.ConnectConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		t.Cleanup(func() {
			c := conn(t)
			defer c.Close(context.Background())
			if _, err := c.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
				t.Errorf("drop schema %s: %v", schema, err)
			}
		})
		return storetest.Reopener{
			Open: func(t *testing.T) store.Store {
				s, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema})
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				return s
			},
			PreEntries: func(t *testing.T, ids []int64, rs []wamux.Receipt) {
				c := conn(t)
				defer c.Close(context.Background())
				exec := func(q string, args ...any) {
					t.Helper()
					if _, err := c.Exec(context.Background(), q, args...); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
				}
				exec(`DROP TABLE receipt_log_entries`)
				exec(`DELETE FROM schema_migrations WHERE version = 60`)
				exec(`CREATE TABLE receipt_log (id BIGSERIAL PRIMARY KEY, message_id TEXT NOT NULL, account_id TEXT NOT NULL,
					receipt_type TEXT NOT NULL, event_time BIGINT NOT NULL, callback_data TEXT NOT NULL, recipient TEXT NOT NULL,
					error_code BIGINT NOT NULL, error_title TEXT NOT NULL, source TEXT NOT NULL, received_at BIGINT NOT NULL)`)
				for i, r := range rs {
					exec(`INSERT INTO receipt_log VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)`, ids[i], r.MessageID,
						r.AccountID, string(r.Type), r.EventTime.UnixMilli(), r.CallbackData, r.Recipient, r.ErrorCode,
						r.ErrorTitle, r.Source, r.ReceivedAt.UnixMilli())
				}
			},
		}
	})
}
