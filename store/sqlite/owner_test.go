//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sqlite_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/sqlite"
)

// TestClaimOneGatewayPerFile: of two stores on one database file, only
// one can claim it; the other is refused with ErrInUse naming the lock
// file, and succeeds once the first released its claim. A store on
// another file is not affected.
func TestClaimOneGatewayPerFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wamux.db")
	open := func(path string) *sqlite.Store {
		s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(path), open(path)
	ca, err := a.Claim(t.Context())
	if err != nil {
		t.Fatalf("first claim: %v", err)
	}
	_, err = b.Claim(t.Context())
	if !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), path+sqlite.LockSuffix) {
		t.Fatalf("second claim on %s: %v, want ErrInUse naming the lock file", path, err)
	}
	other, err := open(filepath.Join(t.TempDir(), "wamux.db")).Claim(t.Context())
	if err != nil {
		t.Fatalf("claim on another file: %v", err)
	}
	defer other.Release()
	select {
	case <-ca.Lost():
		t.Fatal("a file claim reported lost")
	default:
	}
	if err := ca.Release(); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := ca.Release(); err != nil {
		t.Fatalf("second release: %v", err)
	}
	cb, err := b.Claim(t.Context())
	if err != nil {
		t.Fatalf("claim after the first released: %v", err)
	}
	cb.Release()
}
