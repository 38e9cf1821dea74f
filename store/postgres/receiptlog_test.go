package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store/postgres"
)

// schemaStores opens stores on one schema, dropped when the test ends, so
// a test can close a store and open the same data again.
type schemaStores struct {
	dsn, schema string
}

func newSchemaStores(t *testing.T) *schemaStores {
	t.Helper()
	ss := &schemaStores{dsn: testDSN(t), schema: randomSchema(t)}
	t.Cleanup(func() {
		conn := ss.conn(t)
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{ss.schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", ss.schema, err)
		}
	})
	return ss
}

func (ss *schemaStores) open(t *testing.T) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), ss.dsn, postgres.Options{Schema: ss.schema})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

// conn is a plain connection with the schema as its search path.
func (ss *schemaStores) conn(t *testing.T) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(ss.dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = ss.schema
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// awkward holds strings the entry encoding must carry (PostgreSQL text
// cannot hold NUL, so there is none).
var awkward = []string{"", `"quoted"`, `back\slash`, "tab\tnew\nline\r", "\x01\x1f", "ünïcödé ✓ 𝄞", "</script>&"}

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
	ss := newSchemaStores(t)
	ctx := context.Background()
	s := ss.open(t)
	rs := []wamux.Receipt{logReceipt(0), logReceipt(1), logReceipt(2)}
	ids, err := s.AppendReceiptLog(ctx, rs)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.AckReceiptLog(ctx, ids[:1]); err != nil || n != 1 {
		t.Fatalf("ack = %d, %v; want 1", n, err)
	}
	if got, err := s.ListReceiptLog(ctx, 0, 100); err != nil || len(got) != 2 || got[0].ID != ids[1] {
		t.Fatalf("log = %+v (%v), want the two receipts not acknowledged", got, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = ss.open(t)
	defer s.Close()
	got, err := s.ListReceiptLog(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
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
	conn := ss.conn(t)
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM receipt_log_entries").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d entries left (%v) after every receipt was acknowledged", n, err)
	}
}

// TestLogMigratesRowsPerReceipt: receipts waiting in the per-receipt log
// (before migration 0060) come out of the new one unchanged, in order,
// and can be acknowledged; new ids follow them.
func TestLogMigratesRowsPerReceipt(t *testing.T) {
	ss := newSchemaStores(t)
	ctx := context.Background()
	if err := ss.open(t).Close(); err != nil {
		t.Fatal(err)
	}
	conn := ss.conn(t)
	defer conn.Close(ctx)
	for _, q := range []string{
		`DROP TABLE receipt_log_entries`,
		`DELETE FROM schema_migrations WHERE version = 60`,
		`CREATE TABLE receipt_log (id BIGSERIAL PRIMARY KEY, message_id TEXT NOT NULL, account_id TEXT NOT NULL,
			receipt_type TEXT NOT NULL, event_time BIGINT NOT NULL, callback_data TEXT NOT NULL, recipient TEXT NOT NULL,
			error_code BIGINT NOT NULL, error_title TEXT NOT NULL, source TEXT NOT NULL, received_at BIGINT NOT NULL)`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var rs []wamux.Receipt
	for i, id := range []int64{7, 8, 12} {
		r := logReceipt(i + 3)
		rs = append(rs, r)
		if _, err := conn.Exec(ctx, `INSERT INTO receipt_log VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)`, id, r.MessageID,
			r.AccountID, string(r.Type), r.EventTime.UnixMilli(), r.CallbackData, r.Recipient, r.ErrorCode, r.ErrorTitle,
			r.Source, r.ReceivedAt.UnixMilli()); err != nil {
			t.Fatal(err)
		}
	}

	s := ss.open(t)
	defer s.Close()
	got, err := s.ListReceiptLog(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
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
	if left, err := s.ListReceiptLog(ctx, 0, 100); err != nil || len(left) != 1 || left[0].ID != ids[0] {
		t.Fatalf("log after ack = %+v (%v), want only the new receipt", left, err)
	}
}
