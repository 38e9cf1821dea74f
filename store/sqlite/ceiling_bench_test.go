package sqlite_test

import (
	"database/sql"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wamux/wamux/store/sqlite"
)

// BenchmarkRawReceiptRows measures what this machine's SQLite (the same
// modernc build) can insert at best into a table of message_receipts'
// exact shape, with nothing else going on: one connection, WAL,
// synchronous=NORMAL (no fsync per commit), statements of 100 rows,
// transactions of 2,000 rows (about the pipeline's largest batch). It is
// the ceiling any receipt pipeline on this store is measured against: every
// distinct receipt is one such row, on top of the state, key and log
// writes. "sequential" inserts the rows in key order (seq, entry) as the
// receipts of fresh messages mostly arrive; "shuffled" inserts the same
// rows in random order, the worst case of a B-tree clustered by message.
//
//	go test ./store/sqlite -run '^$' -bench RawReceiptRows -benchtime 1000000x
func BenchmarkRawReceiptRows(b *testing.B) {
	ddl := receiptTableDDL(b)
	for _, order := range []string{"sequential", "shuffled"} {
		b.Run(order, func(b *testing.B) {
			const perStmt, perTx = 100, 2000
			type row struct {
				seq   int64
				entry string
			}
			// The rows of messages with three receipts each: all the
			// first receipts, then all the second, then the third, as
			// `bench receipts` delivers them.
			msgs := (b.N + 2) / 3
			entries := []string{"sent", "delivered", "read"}
			rows := make([]row, 0, b.N+perStmt)
			for i := 0; len(rows) < b.N; i++ {
				rows = append(rows, row{int64(i%msgs) + 1, entries[(i/msgs)%3]})
			}
			if order == "shuffled" {
				rng := rand.New(rand.NewPCG(1, 2))
				rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
			}
			for len(rows)%perStmt != 0 { // pad with repeats the conflict clause skips
				rows = append(rows, rows[len(rows)-1])
			}
			db, err := sql.Open("sqlite", filepath.Join(b.TempDir(), "raw.db")+
				"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=cache_size(-32768)")
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			if _, err := db.Exec(ddl); err != nil {
				b.Fatal(err)
			}
			stmt, err := db.Prepare(`INSERT INTO message_receipts (seq, entry, event_time, callback_data, recipient,
				error_code, error_title, source, stamp, applied) VALUES ` +
				strings.TrimSuffix(strings.Repeat("(?,?,?,?,?,?,?,?,?,?),", perStmt), ",") + ` ON CONFLICT DO NOTHING`)
			if err != nil {
				b.Fatal(err)
			}
			defer stmt.Close()
			args := make([]any, 0, perStmt*10)
			b.ResetTimer()
			var tx *sql.Tx
			var txStmt *sql.Stmt
			inTx := 0
			for i := 0; i < len(rows); i += perStmt {
				if tx == nil {
					if tx, err = db.Begin(); err != nil {
						b.Fatal(err)
					}
					txStmt = tx.Stmt(stmt)
				}
				args = args[:0]
				for _, r := range rows[i : i+perStmt] {
					const t0 = 1767225600000
					args = append(args, r.seq, r.entry, t0+r.seq, "msg-"+strconv.FormatInt(r.seq, 10), "16505551234",
						int64(0), "", "webhook", int64(t0), int64(t0))
				}
				if _, err := txStmt.Exec(args...); err != nil {
					b.Fatal(err)
				}
				if inTx += perStmt; inTx >= perTx || i+perStmt == len(rows) {
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
					tx, inTx = nil, 0
				}
			}
			b.StopTimer()
			var n int
			if err := db.QueryRow(`SELECT count(*) FROM message_receipts`).Scan(&n); err != nil {
				b.Fatal(err)
			}
			if n != b.N {
				b.Fatalf("%d rows stored, want %d", n, b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// receiptTableDDL returns message_receipts' CREATE statement as the
// migrations leave it, so the benchmark's table cannot drift from the
// real one.
func receiptTableDDL(b *testing.B) string {
	path := filepath.Join(b.TempDir(), "wamux.db")
	s, err := sqlite.Open(b.Context(), path, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var ddl string
	if err := db.QueryRow(`SELECT sql FROM sqlite_master WHERE name = 'message_receipts'`).Scan(&ddl); err != nil {
		b.Fatal(err)
	}
	return ddl
}

// BenchmarkWALFsync measures one durable commit's floor on this machine's
// disk: a 4 KiB append to a file (a WAL frame) and its fsync. Every
// webhook answer waits for at least one, so with c requests in flight a
// durable handler answers at most c / (round trip + fsync) per second,
// whatever its CPU cost (docs/BENCHMARKS.md).
//
//	go test ./store/sqlite -run '^$' -bench WALFsync -benchtime 2000x
func BenchmarkWALFsync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "fsync.wal"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, 4096)
	b.ResetTimer()
	for range b.N {
		if _, err := f.Write(page); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fsyncs/s")
}

// BenchmarkReceiptLayouts compares, under the workload of
// BenchmarkRawReceiptRows (messages with three receipts each, arriving
// round by round, in key order, 100 rows a statement, 2,000 a
// transaction), the cost per receipt of three ways to store receipts:
//
//   - "row-per-receipt": message_receipts as the migrations leave it, a
//     row per receipt (what the store does);
//   - "row-per-message": one row per message with a column per receipt
//     type, NULL until that receipt arrives, written by an upsert: the
//     record grows with each receipt;
//   - "row-per-message-fixed": the same, but every type's columns hold a
//     placeholder of the same width from the start, so an upsert rewrites
//     the record in place.
//
// It measures a structural lever of the receipt pipeline's writer: how much
// of a receipt's row cost a layout by message could save, before any of
// the pipeline's other work.
//
//	go test ./store/sqlite -run '^$' -bench ReceiptLayouts -benchtime 900000x
func BenchmarkReceiptLayouts(b *testing.B) {
	const t0 = 1767225600000
	// A millisecond time needs six bytes in an SQLite record; so does the
	// placeholder, the largest six-byte integer.
	const placeholder = 1<<47 - 1
	types := []string{"sent", "delivered", "read", "failed"}
	layouts := []struct {
		name string
		ddl  string
		// stmt returns the statement for n rows of receipt type k.
		stmt func(k, n int) string
		// row appends the arguments of message seq's receipt.
		row func(args []any, seq int64, k int) []any
		// stored counts the receipts stored.
		stored string
	}{
		{
			name: "row-per-receipt",
			ddl:  receiptTableDDL(b),
			stmt: func(_, n int) string {
				return `INSERT INTO message_receipts (seq, entry, event_time, callback_data, recipient, error_code,
					error_title, source, stamp, applied) VALUES ` + valueRows(10, n) + ` ON CONFLICT DO NOTHING`
			},
			row: func(args []any, seq int64, k int) []any {
				return append(args, seq, types[k], t0+seq, "msg-"+strconv.FormatInt(seq, 10), "16505551234",
					int64(0), "", "webhook", int64(t0), int64(t0))
			},
			stored: `SELECT count(*) FROM message_receipts`,
		},
		{
			name: "row-per-message",
			ddl: `CREATE TABLE by_message (seq INTEGER PRIMARY KEY, t_sent INTEGER, t_delivered INTEGER,
				t_read INTEGER, t_failed INTEGER, applied INTEGER, stamp INTEGER, callback_data TEXT NOT NULL,
				recipient TEXT NOT NULL, error_code INTEGER NOT NULL, error_title TEXT NOT NULL, source TEXT NOT NULL)`,
			stmt: func(k, n int) string {
				c := "t_" + types[k]
				return `INSERT INTO by_message (seq, ` + c + `, applied, stamp, callback_data, recipient, error_code,
					error_title, source) VALUES ` + valueRows(9, n) + ` ON CONFLICT (seq) DO UPDATE SET ` +
					c + ` = excluded.` + c + `, applied = excluded.applied, stamp = excluded.stamp WHERE ` + c + ` IS NULL`
			},
			row: func(args []any, seq int64, _ int) []any {
				return append(args, seq, t0+seq, int64(t0), int64(t0), "msg-"+strconv.FormatInt(seq, 10),
					"16505551234", int64(0), "", "webhook")
			},
			stored: `SELECT count(t_sent) + count(t_delivered) + count(t_read) FROM by_message`,
		},
		{
			name: "row-per-message-fixed",
			ddl: `CREATE TABLE by_message (seq INTEGER PRIMARY KEY,
				t_sent INTEGER, t_delivered INTEGER, t_read INTEGER, t_failed INTEGER,
				a_sent INTEGER, a_delivered INTEGER, a_read INTEGER, a_failed INTEGER,
				s_sent INTEGER, s_delivered INTEGER, s_read INTEGER, s_failed INTEGER,
				callback_data TEXT NOT NULL, recipient TEXT NOT NULL, error_code INTEGER NOT NULL,
				error_title TEXT NOT NULL, source TEXT NOT NULL)`,
			stmt: func(k, n int) string {
				var cols, vals, set []string
				for j, t := range types {
					for _, p := range []string{"t_", "a_", "s_"} {
						cols = append(cols, p+t)
						if j == k {
							vals = append(vals, "?")
							set = append(set, p+t+" = excluded."+p+t)
						} else {
							vals = append(vals, strconv.Itoa(placeholder))
						}
					}
				}
				row := "(?," + strings.Join(vals, ",") + ",?,?,?,?,?)"
				return `INSERT INTO by_message (seq, ` + strings.Join(cols, ", ") + `, callback_data, recipient,
					error_code, error_title, source) VALUES ` + strings.TrimSuffix(strings.Repeat(row+",", n), ",") +
					` ON CONFLICT (seq) DO UPDATE SET ` + strings.Join(set, ", ")
			},
			row: func(args []any, seq int64, _ int) []any {
				return append(args, seq, t0+seq, int64(t0), int64(t0), "msg-"+strconv.FormatInt(seq, 10),
					"16505551234", int64(0), "", "webhook")
			},
			stored: `SELECT sum((t_sent <> ` + strconv.Itoa(placeholder) + `) + (t_delivered <> ` +
				strconv.Itoa(placeholder) + `) + (t_read <> ` + strconv.Itoa(placeholder) + `)) FROM by_message`,
		},
	}
	for _, l := range layouts {
		b.Run(l.name, func(b *testing.B) {
			const perStmt, perTx = 100, 2000
			msgs := (b.N + 2) / 3
			db, err := sql.Open("sqlite", filepath.Join(b.TempDir(), "layout.db")+
				"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=cache_size(-32768)")
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			if _, err := db.Exec(l.ddl); err != nil {
				b.Fatal(err)
			}
			stmts := make([]*sql.Stmt, 3)
			for k := range stmts {
				if stmts[k], err = db.Prepare(l.stmt(k, perStmt)); err != nil {
					b.Fatal(err)
				}
				defer stmts[k].Close()
			}
			args := make([]any, 0, perStmt*18)
			b.ResetTimer()
			var tx *sql.Tx
			inTx := 0
			// Receipt i is of message i mod msgs, type i / msgs; a
			// statement holds one type's, padded with repeats of its last.
			for i := 0; i < b.N; {
				k := (i / msgs) % 3
				end := min(i+perStmt, b.N, (i/msgs+1)*msgs)
				if tx == nil {
					if tx, err = db.Begin(); err != nil {
						b.Fatal(err)
					}
				}
				args = args[:0]
				for j := i; j < i+perStmt; j++ {
					args = l.row(args, int64(min(j, end-1)%msgs)+1, k)
				}
				if _, err := tx.Stmt(stmts[k]).Exec(args...); err != nil {
					b.Fatal(err)
				}
				inTx += end - i
				i = end
				if inTx >= perTx || i == b.N {
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
					tx, inTx = nil, 0
				}
			}
			b.StopTimer()
			var n int
			if err := db.QueryRow(l.stored).Scan(&n); err != nil {
				b.Fatal(err)
			}
			if n != b.N {
				b.Fatalf("%d receipts stored, want %d", n, b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "receipts/s")
		})
	}
}

// valueRows returns n parenthesised rows of cols placeholders each.
func valueRows(cols, n int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?,", cols), ",") + "),"
	return strings.TrimSuffix(strings.Repeat(row, n), ",")
}
