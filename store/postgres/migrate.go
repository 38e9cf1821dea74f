package postgres

import (
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux/store/internal/migration"
)

// migrations holds the schema as numbered SQL files; each is applied once,
// in order, and recorded in schema_migrations with its checksum.
//
//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the first pg_advisory_xact_lock key that serialises
// concurrent Opens of one schema (several gateway nodes starting at
// once); the second is the hash of the schema's name, so stores in other
// schemas of the server migrate without waiting for each other.
const migrationLock = 0x77616d75 // "wamu"

// checksumVersion is the migration that adds schema_migrations.checksum;
// before it is applied the column does not exist.
const checksumVersion = 90

// migrate applies pending migrations in one transaction under
// migrationLock. It refuses a database migrated by a newer binary and one
// whose applied migration files changed since (migration.Pending).
func (s *Store) migrate(ctx context.Context) error {
	files, err := migration.Load(migrations, "migrations/*.sql")
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext(COALESCE(NULLIF($2, ''), current_schema(), '')))",
			int32(migrationLock), s.schema); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if s.schema != "" {
			if err := ensureSchema(ctx, tx, s.schema); err != nil {
				return err
			}
		}
		if s.opts.Schema != "" {
			// The connection's search_path named the schema before it
			// existed; make this transaction resolve it now.
			if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+pgx.Identifier{s.opts.Schema}.Sanitize()); err != nil {
				return fmt.Errorf("set search_path: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    BIGINT PRIMARY KEY,
			applied_at BIGINT NOT NULL)`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		applied, err := readApplied(ctx, tx)
		if err != nil {
			return err
		}
		pending, err := migration.Pending(files, applied)
		if err != nil {
			return err
		}
		hasChecksum := false
		for _, a := range applied {
			hasChecksum = hasChecksum || a.Version == checksumVersion
		}
		for _, f := range pending {
			if _, err := tx.Exec(ctx, f.Body); err != nil {
				return fmt.Errorf("apply migration %s: %w", f.Name, err)
			}
			hasChecksum = hasChecksum || f.Version == checksumVersion
			q, args := "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)", []any{f.Version, time.Now().UnixMilli()}
			if hasChecksum {
				q, args = "INSERT INTO schema_migrations (version, applied_at, checksum) VALUES ($1, $2, $3)", append(args, f.Checksum)
			}
			if _, err := tx.Exec(ctx, q, args...); err != nil {
				return fmt.Errorf("record migration %s: %w", f.Name, err)
			}
		}
		// Migrations applied before checksums were kept take the checksum
		// of the file this binary carries.
		if hasChecksum {
			for _, f := range files {
				if _, err := tx.Exec(ctx, "UPDATE schema_migrations SET checksum = $1 WHERE version = $2 AND checksum IS NULL",
					f.Checksum, f.Version); err != nil {
					return fmt.Errorf("record checksum of migration %s: %w", f.Name, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", wrapErr(err))
	}
	return nil
}

// readApplied reads schema_migrations of the transaction's schema, with
// the checksums once the column exists.
func readApplied(ctx context.Context, tx pgx.Tx) ([]migration.Applied, error) {
	var hasColumn bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'schema_migrations' AND column_name = 'checksum')`).Scan(&hasColumn); err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	q := "SELECT version, '' FROM schema_migrations"
	if hasColumn {
		q = "SELECT version, coalesce(checksum, '') FROM schema_migrations"
	}
	rows, err := tx.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	applied, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (migration.Applied, error) {
		var a migration.Applied
		err := row.Scan(&a.Version, &a.Checksum)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	return applied, nil
}
