package sqlite_test

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wamux/wamux/store/internal/migration"
	"github.com/wamux/wamux/store/sqlite"
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

// openClose opens the store at path and closes it again.
func openClose(t *testing.T, path string) error {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return nil
}

// rawExec runs statements on the database at path outside the store.
func rawExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// recordedChecksums reads schema_migrations: version → checksum ("" for
// NULL).
func recordedChecksums(t *testing.T, path string) map[int64]string {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT version, coalesce(checksum, '') FROM schema_migrations")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[int64]string{}
	for rows.Next() {
		var v int64
		var sum string
		if err := rows.Scan(&v, &sum); err != nil {
			t.Fatal(err)
		}
		got[v] = sum
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestMigrateRecordsChecksumsAndReopens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wamux.db")
	_, sums, _ := migrationFiles(t)
	for i := range 2 {
		if err := openClose(t, path); err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if got := recordedChecksums(t, path); !maps.Equal(got, sums) {
			t.Fatalf("after open %d: schema_migrations = %v, want %v", i, got, sums)
		}
	}
}

// checksumMigration is the migration that adds schema_migrations.checksum.
const checksumMigration = 120

// A database migrated before checksums were kept (no checksum column)
// gets the column, the checksums of the files it ran, and opens again.
func TestMigrateUpgradesDatabaseWithoutChecksums(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wamux.db")
	_, sums, _ := migrationFiles(t)
	if err := openClose(t, path); err != nil {
		t.Fatal(err)
	}
	rawExec(t, path,
		`ALTER TABLE schema_migrations DROP COLUMN checksum`,
		`DELETE FROM schema_migrations WHERE version = `+strconv.Itoa(checksumMigration))
	for i := range 2 {
		if err := openClose(t, path); err != nil {
			t.Fatalf("open %d after the upgrade: %v", i, err)
		}
		if got := recordedChecksums(t, path); !maps.Equal(got, sums) {
			t.Fatalf("open %d: schema_migrations = %v, want %v", i, got, sums)
		}
	}
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wamux.db")
	_, _, newest := migrationFiles(t)
	if err := openClose(t, path); err != nil {
		t.Fatal(err)
	}
	rawExec(t, path, `INSERT INTO schema_migrations (version, applied_at, checksum) VALUES (`+
		strconv.FormatInt(newest+1, 10)+`, 1, 'abc')`)
	err := openClose(t, path)
	want := "database schema is at migration " + strconv.FormatInt(newest+1, 10) +
		", this binary knows up to " + strconv.FormatInt(newest, 10) + "; run a newer wamux"
	if tooNew := (*migration.TooNewError)(nil); !errors.As(err, &tooNew) || !strings.Contains(err.Error(), want) {
		t.Fatalf("open = %v, want a TooNewError saying %q", err, want)
	}
}

func TestMigrateRefusesChangedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wamux.db")
	names, _, _ := migrationFiles(t)
	if err := openClose(t, path); err != nil {
		t.Fatal(err)
	}
	// The database ran another text of 0050 than the file now holds.
	other := sha256.Sum256([]byte("CREATE TABLE x (y INTEGER);"))
	rawExec(t, path, `UPDATE schema_migrations SET checksum = '`+hex.EncodeToString(other[:])+`' WHERE version = 50`)
	err := openClose(t, path)
	if changed := (*migration.ChangedError)(nil); !errors.As(err, &changed) || changed.Name != names[50] ||
		!strings.Contains(err.Error(), names[50]) {
		t.Fatalf("open = %v, want a ChangedError naming %s", err, names[50])
	}
}
