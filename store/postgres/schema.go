package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux"
)

// schemaDropTimeout bounds the drop of a FreshSchema, which runs after
// the caller's context may have ended.
const schemaDropTimeout = 30 * time.Second

// FreshSchema creates a schema with a new name (prefix and 12 random hex
// digits) on the server dsn names and returns dsn with that schema as its
// search_path, and a drop that removes the schema with everything in it.
// A tool that works in it (a bench run, a chaos round) leaves the
// database as it found it and never meets the rows of an earlier run.
// drop uses a context of its own, so it works after ctx ended.
func FreshSchema(ctx context.Context, dsn, prefix string) (string, func() error, error) {
	if !schemaName.MatchString(prefix + "000000000000") {
		return "", nil, wamux.Errorf(wamux.EInvalid, "postgres schema prefix must be lower-case letters, digits and _")
	}
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", nil, fmt.Errorf("postgres: name a schema: %w", err)
	}
	schema := prefix + hex.EncodeToString(b)
	withPath, err := WithSearchPath(dsn, schema)
	if err != nil {
		return "", nil, err
	}
	ident := pgx.Identifier{schema}.Sanitize()
	if err := execOnce(ctx, dsn, "CREATE SCHEMA "+ident); err != nil {
		return "", nil, fmt.Errorf("postgres: create schema %s: %w", schema, wrapErr(err))
	}
	drop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), schemaDropTimeout)
		defer cancel()
		if err := execOnce(ctx, dsn, "DROP SCHEMA IF EXISTS "+ident+" CASCADE"); err != nil {
			return fmt.Errorf("postgres: drop schema %s: %w", schema, wrapErr(err))
		}
		return nil
	}
	return withPath, drop, nil
}

// execOnce runs one statement on a connection of its own.
func execOnce(ctx context.Context, dsn, sql string) error {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return wamux.Errorf(wamux.EInvalid, "postgres connection string does not parse")
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = ConnectTimeoutDefault
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// WithSearchPath returns dsn (a postgres:// URL or a keyword/value
// string) with its search_path set to schema alone.
func WithSearchPath(dsn, schema string) (string, error) {
	if !schemaName.MatchString(schema) {
		return "", wamux.Errorf(wamux.EInvalid, "postgres schema must match %s", schemaName)
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", wamux.Errorf(wamux.EInvalid, "postgres connection string does not parse")
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	if _, err := pgx.ParseConfig(dsn); err != nil {
		return "", wamux.Errorf(wamux.EInvalid, "postgres connection string does not parse")
	}
	// In a keyword/value string a later keyword wins over an earlier one.
	return strings.TrimSpace(dsn) + " search_path=" + schema, nil
}

// pathSchema is the schema a search_path creates tables in: its first
// entry other than $user, unquoted ("a""b" is a"b) or folded to lower
// case as PostgreSQL reads an identifier; "" when there is none.
func pathSchema(searchPath string) (string, error) {
	for _, part := range splitPath(searchPath) {
		part = strings.TrimSpace(part)
		switch {
		case part == "" || part == "$user":
			continue
		case strings.HasPrefix(part, `"`):
			if len(part) < 2 || !strings.HasSuffix(part, `"`) {
				return "", errors.New("search_path has an unterminated quoted name")
			}
			return strings.ReplaceAll(part[1:len(part)-1], `""`, `"`), nil
		default:
			return strings.ToLower(part), nil
		}
	}
	return "", nil
}

// splitPath splits a search_path at the commas outside quoted names.
func splitPath(s string) []string {
	var parts []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

// ensureSchema creates schema unless it exists. The existence check comes
// first so that a role without CREATE on the database can use a schema
// made for it; a concurrent creation by another node is no error.
func ensureSchema(ctx context.Context, tx pgx.Tx, schema string) error {
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
		return fmt.Errorf("look up schema: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	return nil
}
