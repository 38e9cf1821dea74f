package sqlite_test

import (
	"path/filepath"
	"testing"

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
