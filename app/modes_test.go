//go:build unix

package app_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/wamux/wamux/app"
	"github.com/wamux/wamux/config"
)

// TestDataFilesClosedToOthers: under umask 022, the data directory the
// gateway creates is 0700, and the database, its -wal and -shm and the
// key file it keeps without a secret_key are 0600.
func TestDataFilesClosedToOthers(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.APIKeys = "127.0.0.1:0", filepath.Join(t.TempDir(), "data"), []string{testKey}
	a := newApp(cfg)
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stopApp(t, a)
	call(t, a, "POST", "/v1/accounts", `{"id":"acc","phone_number_id":"555001","access_token":"tok","rate_per_sec":5}`)
	modes := map[string]os.FileMode{cfg.DataDir: 0o700}
	for _, name := range []string{app.SQLiteFile, app.SQLiteFile + "-wal", app.SQLiteFile + "-shm", app.SecretKeyFile} {
		modes[filepath.Join(cfg.DataDir, name)] = 0o600
	}
	for name, want := range modes {
		info, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode().Perm(); got != want {
			t.Errorf("%s has mode %#o, want %#o", name, got, want)
		}
	}
}
