package app_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux/app"
	"github.com/wamux/wamux/config"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/postgres"
	"github.com/wamux/wamux/store/postgres/pgtest"
)

func newApp(cfg config.Config) *app.App {
	return app.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func stopApp(t *testing.T, a *app.App) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// TestOneGatewayPerSQLiteStore: a second gateway on the data dir of a
// running one refuses to start, with an error naming the database and
// what to do; once the first stopped, it starts.
func TestOneGatewayPerSQLiteStore(t *testing.T) {
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.APIKeys = "127.0.0.1:0", t.TempDir(), []string{testKey}
	first := newApp(cfg)
	if err := first.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := newApp(cfg)
	err := second.Start(context.Background())
	if err == nil {
		stopApp(t, second)
		stopApp(t, first)
		t.Fatal("a second gateway started on the same data dir")
	}
	t.Log(err)
	db := filepath.Join(cfg.DataDir, app.SQLiteFile)
	if !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), db) || !strings.Contains(err.Error(), "--data-dir") {
		t.Fatalf("second start: %v, want ErrInUse naming %s and the data dir setting", err, db)
	}
	stopApp(t, first)
	if err := second.Start(context.Background()); err != nil {
		t.Fatalf("start after the first stopped: %v", err)
	}
	stopApp(t, second)
}

// pgStoreURL returns WAMUX_TEST_POSTGRES (or skips) with a password the
// server ignores (trust auth) and the search_path of a fresh schema,
// dropped when the test ends.
func pgStoreURL(t *testing.T) (string, string) {
	t.Helper()
	dsn := pgtest.DSN()
	if dsn == "" {
		t.Skip("WAMUX_TEST_POSTGRES is not set")
	}
	schema := pgtest.Schema(t, dsn, "wamux_test_")
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "hunter2")
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), schema
}

// TestOneGatewayPerPostgresSchema: the same on PostgreSQL, per schema;
// the error names the store without its password.
func TestOneGatewayPerPostgresSchema(t *testing.T) {
	dsn, schema := pgStoreURL(t)
	cfg := config.Default()
	cfg.Listen, cfg.Store, cfg.APIKeys, cfg.DataDir = "127.0.0.1:0", dsn, []string{testKey}, t.TempDir()
	first := newApp(cfg)
	if err := first.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := newApp(cfg)
	err := second.Start(context.Background())
	if err == nil {
		stopApp(t, second)
		stopApp(t, first)
		t.Fatal("a second gateway started on the same schema")
	}
	t.Log(err)
	if !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), "schema "+schema) ||
		!strings.Contains(err.Error(), cfg.RedactedStore()) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("second start: %v, want ErrInUse naming %s and schema %s, no password", err, cfg.RedactedStore(), schema)
	}
	stopApp(t, first)
	if err := second.Start(context.Background()); err != nil {
		t.Fatalf("start after the first stopped: %v", err)
	}
	stopApp(t, second)
}

// TestLostPostgresClaimStopsTheGateway: when another process takes the
// schema's lock after the gateway's lock connection broke, the gateway
// reports it on Fatal (its dispatcher stopped) and still stops cleanly.
func TestLostPostgresClaimStopsTheGateway(t *testing.T) {
	dsn, schema := pgStoreURL(t)
	cfg := config.Default()
	cfg.Listen, cfg.Store, cfg.APIKeys, cfg.DataDir = "127.0.0.1:0", dsn, []string{testKey}, t.TempDir()
	a := newApp(cfg)
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer stopApp(t, a)
	other, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	key := uint64(postgres.OwnerLockKey(schema))
	var holder uint32
	if err := other.QueryRow(t.Context(), `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND objsubid = 1 AND classid = $1::bigint::oid AND objid = $2::bigint::oid`,
		int64(key>>32), int64(key&0xffffffff)).Scan(&holder); err != nil {
		t.Fatalf("the gateway's lock: %v", err)
	}
	// Wait for the lock first, so this session gets it the moment the
	// gateway's lock session ends.
	locked := make(chan error, 1)
	go func() {
		_, err := other.Exec(context.Background(), "SELECT pg_advisory_lock($1)", int64(key))
		locked <- err
	}()
	killer, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close(context.Background())
	testwait.For(t, "the other session to wait for the lock", 30*time.Second, func() bool {
		var waiting bool
		if err := killer.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted AND objid = $1::bigint::oid)`, int64(key&0xffffffff)).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting
	})
	if _, err := killer.Exec(t.Context(), "SELECT pg_terminate_backend($1)", int64(holder)); err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatalf("other session's lock: %v", err)
	}
	select {
	case err := <-a.Fatal(): // at once: the lock session ended
		t.Log(err)
		if !errors.Is(err, store.ErrInUse) || strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("fatal: %v, want ErrInUse without the password", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the gateway did not notice it lost its store")
	}
}
