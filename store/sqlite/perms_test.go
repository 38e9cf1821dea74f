//go:build unix

package sqlite_test

import (
	"bytes"
	"database/sql"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store/sqlite"
)

// withUmask runs the test under umask, the process's, restored after.
func withUmask(t *testing.T, umask int) {
	old := syscall.Umask(umask)
	t.Cleanup(func() { syscall.Umask(old) })
}

func wantMode(t *testing.T, name string, want fs.FileMode) {
	t.Helper()
	info, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != want {
		t.Errorf("%s has mode %#o, want %#o", filepath.Base(name), got, want)
	}
}

// writeSome makes the store write, so its WAL holds frames.
func writeSome(t *testing.T, s *sqlite.Store) {
	t.Helper()
	if _, err := s.CreateAccount(t.Context(), wamux.Account{ID: "acc1", PhoneNumberID: "1001", AccessToken: "t", RatePerSec: 1}); err != nil {
		t.Fatal(err)
	}
}

// TestFilesClosedToOthers: under umask 022 in an existing 0755 directory
// (a typical volume), the database, its -wal and -shm and the lock file
// are 0600, while open and after a reopen; the directory is left as it is
// with a warning naming it.
func TestFilesClosedToOthers(t *testing.T) {
	withUmask(t, 0o022)
	dir := filepath.Join(t.TempDir(), "volume")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	wantMode(t, dir, 0o755)
	path := filepath.Join(dir, "wamux.db")
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	for round := range 2 {
		s, err := sqlite.Open(t.Context(), path, sqlite.Options{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		claim, err := s.Claim(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			writeSome(t, s)
		}
		for _, suffix := range []string{"", "-wal", "-shm", sqlite.LockSuffix} {
			wantMode(t, path+suffix, 0o600)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := claim.Release(); err != nil {
			t.Fatal(err)
		}
	}
	wantMode(t, dir, 0o755)
	if !strings.Contains(logs.String(), "open to group or others") || !strings.Contains(logs.String(), dir) {
		t.Errorf("no warning about the data directory's mode:\n%s", logs.String())
	}
}

// TestWideFilesNarrowed: a database and WAL left 0644 (written by SQLite
// under umask 022, as before the store set modes) are narrowed to 0600 at
// open, and the -shm SQLite makes follows them.
func TestWideFilesNarrowed(t *testing.T) {
	withUmask(t, 0o022)
	dir := t.TempDir()
	path := filepath.Join(dir, "wamux.db")
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE t (x); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	wantMode(t, path, 0o644)
	wantMode(t, path+"-wal", 0o644)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+"-wal", nil, 0o644); err != nil { // an empty WAL left behind
		t.Fatal(err)
	}
	s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writeSome(t, s)
	for _, suffix := range []string{"", "-wal", "-shm"} {
		wantMode(t, path+suffix, 0o600)
	}
}

// TestDataDirCreatedClosed: a data directory the store creates is 0700,
// whatever the umask lets through.
func TestDataDirCreatedClosed(t *testing.T) {
	withUmask(t, 0)
	dir := filepath.Join(t.TempDir(), "a", "data")
	s, err := sqlite.Open(t.Context(), filepath.Join(dir, "wamux.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writeSome(t, s)
	wantMode(t, dir, 0o700)
	for _, suffix := range []string{"", "-wal", "-shm"} {
		wantMode(t, filepath.Join(dir, "wamux.db"+suffix), 0o600)
	}
}
