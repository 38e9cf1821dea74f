package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/postgres"
	"github.com/wamux/wamux/store/storetest"
)

// testDSN returns WAMUX_TEST_POSTGRES or skips. When the variable is set
// the server must answer: CI sets it on purpose, so a dead server fails
// loudly instead of turning the suite into a silent skip.
func testDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("WAMUX_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("WAMUX_TEST_POSTGRES is not set; set it to a PostgreSQL URL (e.g. postgres://postgres@127.0.0.1:5432/test) to run the PostgreSQL store suite")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("WAMUX_TEST_POSTGRES is set but PostgreSQL does not answer: %v", err)
	}
	defer conn.Close(ctx)
	if err := conn.Ping(ctx); err != nil {
		t.Fatalf("WAMUX_TEST_POSTGRES is set but PostgreSQL does not answer: %v", err)
	}
	return dsn
}

func randomSchema(t testing.TB) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "wamux_test_" + hex.EncodeToString(b)
}

// newStore opens a store in a fresh schema and drops the schema when the
// test ends.
func newStore(t testing.TB) *postgres.Store {
	t.Helper()
	dsn := testDSN(t)
	schema := randomSchema(t)
	s, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	testDSN(t)
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t) })
}

func TestEdgeCases(t *testing.T) {
	testDSN(t)
	storetest.RunEdgeCases(t, func(t *testing.T) store.Store { return newStore(t) })
}
