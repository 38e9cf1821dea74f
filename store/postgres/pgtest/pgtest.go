// Package pgtest gives tests a PostgreSQL store in a schema of their own,
// so that tests of several packages can share one server (the one
// WAMUX_TEST_POSTGRES names) without seeing each other's rows.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux/store/postgres"
)

// DSN is the server tests use (WAMUX_TEST_POSTGRES), "" when none is set.
func DSN() string { return os.Getenv("WAMUX_TEST_POSTGRES") }

// Schema creates a schema with a fresh name (prefix and random hex) on
// dsn and drops it, with everything in it, when the test ends.
func Schema(t testing.TB, dsn, prefix string) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	schema := prefix + hex.EncodeToString(b)
	ident := pgx.Identifier{schema}.Sanitize()
	exec := func(ctx context.Context, sql string) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, sql)
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := exec(ctx, "CREATE SCHEMA "+ident); err != nil {
		t.Fatalf("WAMUX_TEST_POSTGRES is set but a schema cannot be created: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec(ctx, "DROP SCHEMA "+ident+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// Open opens a store on dsn in a fresh schema (Schema), closed before the
// schema is dropped.
func Open(t testing.TB, dsn, prefix string) *postgres.Store {
	t.Helper()
	schema := Schema(t, dsn, prefix)
	st, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
