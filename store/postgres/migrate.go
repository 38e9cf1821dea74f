package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// migrations holds the schema as numbered SQL files; each is applied once,
// in order, and recorded in schema_migrations.
//
//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the pg_advisory_xact_lock key that serialises
// concurrent Opens (several gateway nodes starting at once).
const migrationLock = 0x77616d7578 // "wamux"

func (s *Store) migrate(ctx context.Context) error {
	files, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return fmt.Errorf("postgres: list migrations: %w", err)
	}
	sort.Strings(files)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrationLock)); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if s.opts.Schema != "" {
			ident := pgx.Identifier{s.opts.Schema}.Sanitize()
			if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+ident); err != nil {
				return fmt.Errorf("create schema: %w", err)
			}
			// The connection's search_path named the schema before it
			// existed; make this transaction resolve it now.
			if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+ident); err != nil {
				return fmt.Errorf("set search_path: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    BIGINT PRIMARY KEY,
			applied_at BIGINT NOT NULL)`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		rows, err := tx.Query(ctx, "SELECT version FROM schema_migrations")
		if err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		applied := map[int64]bool{}
		for _, v := range versions {
			applied[v] = true
		}
		for _, name := range files {
			base := strings.TrimPrefix(name, "migrations/")
			num, _, _ := strings.Cut(base, "_")
			version, err := strconv.ParseInt(num, 10, 64)
			if err != nil {
				return fmt.Errorf("migration %s: name must start with a number", base)
			}
			if applied[version] {
				continue
			}
			body, err := migrations.ReadFile(name)
			if err != nil {
				return fmt.Errorf("read migration %s: %w", base, err)
			}
			if _, err := tx.Exec(ctx, string(body)); err != nil {
				return fmt.Errorf("apply migration %s: %w", base, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)",
				version, time.Now().UnixMilli()); err != nil {
				return fmt.Errorf("record migration %s: %w", base, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", wrapErr(err))
	}
	return nil
}
