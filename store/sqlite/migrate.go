package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"time"

	"github.com/wamux/wamux/store/internal/migration"
)

// migrations holds the schema as numbered SQL files; each is applied once,
// in order, and recorded in schema_migrations with its checksum.
//
//go:embed migrations/*.sql
var migrations embed.FS

// checksumVersion is the migration that adds schema_migrations.checksum;
// before it is applied the column does not exist.
const checksumVersion = 120

// migrate applies pending migrations in one IMMEDIATE transaction, so a
// second process opening the same file waits instead of racing. It
// refuses a database migrated by a newer binary and one whose applied
// migration files changed since (migration.Pending).
func migrate(ctx context.Context, conn *sql.Conn) (err error) {
	files, err := migration.Load(migrations, "migrations/*.sql")
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("sqlite: begin migration: %w", wrapErr(err))
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
		}
	}()
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("sqlite: create schema_migrations: %w", wrapErr(err))
	}
	applied, err := readApplied(ctx, conn)
	if err != nil {
		return err
	}
	pending, err := migration.Pending(files, applied)
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	hasChecksum := false
	for _, a := range applied {
		hasChecksum = hasChecksum || a.Version == checksumVersion
	}
	for _, f := range pending {
		if _, err := conn.ExecContext(ctx, f.Body); err != nil {
			return fmt.Errorf("sqlite: apply migration %s: %w", f.Name, wrapErr(err))
		}
		hasChecksum = hasChecksum || f.Version == checksumVersion
		q, args := "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)", []any{f.Version, time.Now().UnixMilli()}
		if hasChecksum {
			q, args = "INSERT INTO schema_migrations (version, applied_at, checksum) VALUES (?, ?, ?)", append(args, f.Checksum)
		}
		if _, err := conn.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("sqlite: record migration %s: %w", f.Name, wrapErr(err))
		}
	}
	// Migrations applied before checksums were kept take the checksum of
	// the file this binary carries.
	if hasChecksum {
		for _, f := range files {
			if _, err := conn.ExecContext(ctx, "UPDATE schema_migrations SET checksum = ? WHERE version = ? AND checksum IS NULL",
				f.Checksum, f.Version); err != nil {
				return fmt.Errorf("sqlite: record checksum of migration %s: %w", f.Name, wrapErr(err))
			}
		}
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("sqlite: commit migrations: %w", wrapErr(err))
	}
	return nil
}

// readApplied reads schema_migrations, with the checksums once the
// column exists.
func readApplied(ctx context.Context, conn *sql.Conn) ([]migration.Applied, error) {
	var hasColumn bool
	if err := conn.QueryRowContext(ctx,
		"SELECT count(*) > 0 FROM pragma_table_info('schema_migrations') WHERE name = 'checksum'").Scan(&hasColumn); err != nil {
		return nil, fmt.Errorf("sqlite: read schema_migrations: %w", wrapErr(err))
	}
	q := "SELECT version, '' FROM schema_migrations"
	if hasColumn {
		q = "SELECT version, coalesce(checksum, '') FROM schema_migrations"
	}
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read schema_migrations: %w", wrapErr(err))
	}
	defer rows.Close()
	var applied []migration.Applied
	for rows.Next() {
		var a migration.Applied
		if err := rows.Scan(&a.Version, &a.Checksum); err != nil {
			return nil, fmt.Errorf("sqlite: read schema_migrations: %w", err)
		}
		applied = append(applied, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read schema_migrations: %w", err)
	}
	return applied, nil
}
