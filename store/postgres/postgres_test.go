package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
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
	return newStoreOn(t, testDSN(t))
}

// newStoreOn is newStore on the server and database dsn names.
func newStoreOn(t testing.TB, dsn string) *postgres.Store {
	t.Helper()
	schema := randomSchema(t)
	s, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema, Sealer: storetest.NewKeyring(t)})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		dropSchema(t, dsn, schema)
	})
	return s
}

// dropSchema drops schema and everything in it.
func dropSchema(t testing.TB, dsn, schema string) {
	t.Helper()
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
}

func TestSealing(t *testing.T) {
	t.Parallel() // every store it opens has a schema of its own
	dsn := testDSN(t)
	storetest.RunSealing(t, func(t *testing.T) storetest.Sealing {
		schema := randomSchema(t)
		t.Cleanup(func() { dropSchema(t, dsn, schema) })
		return storetest.Sealing{
			Open: func(t *testing.T, sealer store.Sealer) (store.Store, error) {
				return postgres.Open(t.Context(), dsn, postgres.Options{Schema: schema, Sealer: sealer})
			},
			RawToken: func(t *testing.T, id string) string {
				conn, err := pgx.Connect(t.Context(), dsn)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(context.Background())
				var tok string
				q := `SELECT access_token FROM ` + pgx.Identifier{schema, "accounts"}.Sanitize() + ` WHERE id = $1`
				if err := conn.QueryRow(t.Context(), q, id).Scan(&tok); err != nil {
					t.Fatalf("read token of %s: %v", id, err)
				}
				return tok
			},
		}
	})
}

func TestConformance(t *testing.T) {
	t.Parallel() // every store it opens has a schema of its own
	testDSN(t)
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t) })
}

func TestEdgeCases(t *testing.T) {
	t.Parallel() // every store it opens has a schema of its own
	testDSN(t)
	storetest.RunEdgeCases(t, func(t *testing.T) store.Store { return newStore(t) })
}

// TestConformanceLinguisticCollation runs the suite in a database whose
// default collation is linguistic (ICU en-US), as databases created under
// an en_US.UTF-8 locale are; the test server's C.UTF-8 sorts by bytes
// and would hide results that depend on the collation.
func TestConformanceLinguisticCollation(t *testing.T) {
	t.Parallel() // every store it opens has a schema of its own
	dsn := testDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse WAMUX_TEST_POSTGRES: %v", err)
	}
	name := randomSchema(t)
	ident := pgx.Identifier{name}.Sanitize()
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
	if err := exec(ctx, "CREATE DATABASE "+ident+
		" TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C.UTF-8' LOCALE_PROVIDER icu ICU_LOCALE 'en-US'"); err != nil {
		t.Skipf("no database with an ICU collation can be created here (needs PostgreSQL 15 with ICU and CREATEDB): %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec(ctx, "DROP DATABASE "+ident+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	storetest.Run(t, func(t *testing.T) store.Store { return newStoreOn(t, u.String()) })
}
