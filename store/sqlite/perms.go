package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
)

// The store's files hold the accounts' tokens (sealed) and every message:
// readable and writable by the gateway's user only, whatever the umask.
const (
	dataFileMode fs.FileMode = 0o600
	dataDirMode  fs.FileMode = 0o700
)

// ownedSuffixes name the files the store keeps next to the database: the
// database itself, SQLite's WAL and shared-memory index, and the claim's
// lock file.
var ownedSuffixes = []string{"", "-wal", "-shm", LockSuffix}

// prepareFiles readies the database file at path before SQLite opens it.
// A missing directory is created with mode 0700; an existing one open to
// group or others is left as it is, with a warning, since it may be a
// volume the store does not own. A missing database file is created with
// mode 0600, and the files the store owns that exist are narrowed to
// 0600. SQLite creates -wal and -shm with the mode of the database file,
// so they follow.
func prepareFiles(path string, log *slog.Logger) error {
	dir := filepath.Dir(path)
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, dataDirMode); err != nil {
			return fmt.Errorf("sqlite: create data dir: %w", err)
		}
		// MkdirAll's mode passed through the umask, which may only narrow it.
	case err != nil:
		return fmt.Errorf("sqlite: data dir: %w", err)
	case !info.IsDir():
		return fmt.Errorf("sqlite: data dir %s is not a directory", dir)
	case runtime.GOOS != "windows" && info.Mode().Perm()&0o077 != 0:
		log.Warn("the data directory is open to group or others; the store's files in it are made 0600, the directory is left as it is",
			"dir", dir, "mode", fmt.Sprintf("%#o", info.Mode().Perm()), "fix", "chmod 700 "+dir)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, dataFileMode)
	if err != nil {
		return fmt.Errorf("sqlite: create database file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("sqlite: create database file: %w", err)
	}
	narrowModes(path, log)
	return nil
}

// narrowModes sets mode 0600 on each file the store owns that exists with
// a wider mode. A file it cannot change (another user's) is logged: the
// store still works, and the operator can fix it.
func narrowModes(path string, log *slog.Logger) {
	if runtime.GOOS == "windows" {
		return
	}
	for _, suffix := range ownedSuffixes {
		name := path + suffix
		info, err := os.Stat(name)
		if err != nil || info.Mode().Perm()&^dataFileMode == 0 {
			continue
		}
		if err := os.Chmod(name, dataFileMode); err != nil {
			log.Warn("a store file is open to group or others and its mode cannot be changed", "file", name,
				"mode", fmt.Sprintf("%#o", info.Mode().Perm()), "err", err)
			continue
		}
		log.Info("store file mode narrowed to 0600", "file", name, "was", fmt.Sprintf("%#o", info.Mode().Perm()))
	}
}
