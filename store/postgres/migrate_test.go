package postgres_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux/store/internal/migration"
	"github.com/wamux/wamux/store/postgres"
)

// migrationFiles reads the migration files from the package's directory:
// version → base name and hex SHA-256.
func migrationFiles(t *testing.T) (names, sums map[int64]string, newest int64) {
	t.Helper()
	files, err := migration.Load(os.DirFS("migrations"), "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migration files: %d, %v", len(files), err)
	}
	names, sums = map[int64]string{}, map[int64]string{}
	for _, f := range files {
		names[f.Version], sums[f.Version] = f.Name, f.Checksum
	}
	return names, sums, files[len(files)-1].Version
}

// migrationDB is a fresh schema, dropped when the test ends, that tests
// open stores on and change behind their back.
type migrationDB struct {
	dsn, schema string
}

func newMigrationDB(t *testing.T) migrationDB {
	t.Helper()
	db := migrationDB{dsn: testDSN(t), schema: randomSchema(t)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, db.dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", db.schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{db.schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", db.schema, err)
		}
	})
	return db
}

// openClose opens a store on the schema and closes it again.
func (db migrationDB) openClose(t *testing.T) error {
	t.Helper()
	s, err := postgres.Open(t.Context(), db.dsn, postgres.Options{Schema: db.schema})
	if err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return nil
}

// conn connects with the schema first on the search path.
func (db migrationDB) conn(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), db.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(t.Context(), "SET search_path TO "+pgx.Identifier{db.schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return conn
}

func (db migrationDB) exec(t *testing.T, stmts ...string) {
	t.Helper()
	conn := db.conn(t)
	for _, q := range stmts {
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// checksums reads schema_migrations: version → checksum ("" for NULL).
func (db migrationDB) checksums(t *testing.T) map[int64]string {
	t.Helper()
	rows, err := db.conn(t).Query(t.Context(), "SELECT version, coalesce(checksum, '') FROM schema_migrations")
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]string{}
	var v int64
	var sum string
	if _, err := pgx.ForEachRow(rows, []any{&v, &sum}, func() error { got[v] = sum; return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestMigrateRecordsChecksumsAndReopens(t *testing.T) {
	db := newMigrationDB(t)
	_, sums, _ := migrationFiles(t)
	for i := range 2 {
		if err := db.openClose(t); err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if got := db.checksums(t); !maps.Equal(got, sums) {
			t.Fatalf("after open %d: schema_migrations = %v, want %v", i, got, sums)
		}
	}
}

// checksumMigration is the migration that adds schema_migrations.checksum.
const checksumMigration = 90

// A database migrated before checksums were kept (no checksum column)
// gets the column, the checksums of the files it ran, and opens again.
func TestMigrateUpgradesDatabaseWithoutChecksums(t *testing.T) {
	db := newMigrationDB(t)
	_, sums, _ := migrationFiles(t)
	if err := db.openClose(t); err != nil {
		t.Fatal(err)
	}
	db.exec(t, `ALTER TABLE schema_migrations DROP COLUMN checksum`,
		`DELETE FROM schema_migrations WHERE version = `+strconv.Itoa(checksumMigration))
	for i := range 2 {
		if err := db.openClose(t); err != nil {
			t.Fatalf("open %d after the upgrade: %v", i, err)
		}
		if got := db.checksums(t); !maps.Equal(got, sums) {
			t.Fatalf("open %d: schema_migrations = %v, want %v", i, got, sums)
		}
	}
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	db := newMigrationDB(t)
	_, _, newest := migrationFiles(t)
	if err := db.openClose(t); err != nil {
		t.Fatal(err)
	}
	db.exec(t, `INSERT INTO schema_migrations (version, applied_at, checksum) VALUES (`+
		strconv.FormatInt(newest+1, 10)+`, 1, 'abc')`)
	err := db.openClose(t)
	want := "database schema is at migration " + strconv.FormatInt(newest+1, 10) +
		", this binary knows up to " + strconv.FormatInt(newest, 10) + "; run a newer wamux"
	if tooNew := (*migration.TooNewError)(nil); !errors.As(err, &tooNew) || !strings.Contains(err.Error(), want) {
		t.Fatalf("open = %v, want a TooNewError saying %q", err, want)
	}
}

func TestMigrateRefusesChangedFile(t *testing.T) {
	db := newMigrationDB(t)
	names, _, _ := migrationFiles(t)
	if err := db.openClose(t); err != nil {
		t.Fatal(err)
	}
	// The database ran another text of 0050 than the file now holds.
	other := sha256.Sum256([]byte("CREATE TABLE x (y BIGINT);"))
	db.exec(t, `UPDATE schema_migrations SET checksum = '`+hex.EncodeToString(other[:])+`' WHERE version = 50`)
	err := db.openClose(t)
	if changed := (*migration.ChangedError)(nil); !errors.As(err, &changed) || changed.Name != names[50] ||
		!strings.Contains(err.Error(), names[50]) {
		t.Fatalf("open = %v, want a ChangedError naming %s", err, names[50])
	}
}
