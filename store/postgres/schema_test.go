package postgres_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store/postgres"
)

// schemaExists reports whether the server at dsn has schema.
func schemaExists(t *testing.T, dsn, schema string) bool {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	return exists
}

// A store URL whose search_path names a schema that does not exist yet
// opens: the schema is created, and the tables land in it.
func TestOpenCreatesSearchPathSchema(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	for _, tc := range []struct{ name, path, schema string }{
		{"plain", "wamux_path_%s", "wamux_path_%s"},
		{"folded and listed", "$user, Wamux_Path_%s, public", "wamux_path_%s"},
		{"quoted", `"wamux Path-%s"`, "wamux Path-%s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			suffix := randomSchema(t)
			path, schema := strings.ReplaceAll(tc.path, "%s", suffix), strings.ReplaceAll(tc.schema, "%s", suffix)
			t.Cleanup(func() { dropSchema(t, dsn, schema) })
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			u.RawQuery = "search_path=" + url.PathEscape(path)
			st, err := postgres.Open(t.Context(), u.String(), postgres.Options{})
			if err != nil {
				t.Fatalf("open with search_path %q: %v", path, err)
			}
			defer st.Close()
			if _, err := st.CreateAccount(t.Context(), wamux.Account{ID: "a", PhoneNumberID: "1"}); err != nil {
				t.Fatal(err)
			}
			var in string
			if err := st.Pool().QueryRow(t.Context(), "SELECT table_schema FROM information_schema.tables WHERE table_name = 'accounts' AND table_schema = $1",
				schema).Scan(&in); err != nil {
				t.Fatalf("accounts table not in schema %q: %v", schema, err)
			}
			// A second open finds it done.
			again, err := postgres.Open(t.Context(), u.String(), postgres.Options{})
			if err != nil {
				t.Fatalf("open again: %v", err)
			}
			defer again.Close()
			if _, err := again.GetAccount(t.Context(), "a"); err != nil {
				t.Fatalf("account created by the first open: %v", err)
			}
		})
	}
}

// FreshSchema gives each caller an empty schema of its own, reached
// through the returned URL, and drop removes it.
func TestFreshSchema(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	var schemas []string
	for i := 0; i < 2; i++ {
		spec, drop, err := postgres.FreshSchema(t.Context(), dsn, "wamux_fresh_")
		if err != nil {
			t.Fatal(err)
		}
		st, err := postgres.Open(t.Context(), spec, postgres.Options{})
		if err != nil {
			drop()
			t.Fatal(err)
		}
		// The same account in each run: nothing of the first is seen.
		if _, err := st.CreateAccount(t.Context(), wamux.Account{ID: "a", PhoneNumberID: "1"}); err != nil {
			t.Errorf("run %d: create account: %v", i, err)
		}
		var schema string
		if err := st.Pool().QueryRow(t.Context(), "SELECT current_schema()").Scan(&schema); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(schema, "wamux_fresh_") {
			t.Errorf("run %d: current schema %q, want a wamux_fresh_ one", i, schema)
		}
		schemas = append(schemas, schema)
		st.Close()
		if err := drop(); err != nil {
			t.Fatal(err)
		}
		if schemaExists(t, dsn, schema) {
			t.Errorf("schema %s still there after drop", schema)
		}
	}
	if schemas[0] == schemas[1] {
		t.Errorf("two fresh schemas share the name %s", schemas[0])
	}
}

func TestWithSearchPath(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://u@h:5432/db", "postgres://u@h:5432/db?search_path=s1"},
		{"postgres://u@h/db?sslmode=disable&search_path=old", "postgres://u@h/db?search_path=s1&sslmode=disable"},
		{"host=h dbname=db", "host=h dbname=db search_path=s1"},
	} {
		got, err := postgres.WithSearchPath(tc.dsn, "s1")
		if err != nil || got != tc.want {
			t.Errorf("WithSearchPath(%q) = %q, %v; want %q", tc.dsn, got, err, tc.want)
		}
	}
	if _, err := postgres.WithSearchPath("postgres://h/db", "Bad;Name"); wamux.ErrorCode(err) != wamux.EInvalid {
		t.Errorf("bad schema name: %v, want invalid", err)
	}
}
