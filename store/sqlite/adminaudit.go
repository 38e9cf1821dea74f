package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/wamux/wamux/store"
)

// AddAdminAction records one admin action.
func (s *Store) AddAdminAction(ctx context.Context, a store.AdminAction) error {
	at := ms(a.At)
	if at == 0 {
		at = ms(s.now())
	}
	return s.write(ctx, func(w *writeTx) error {
		if _, err := w.exec(`INSERT INTO admin_audit (at, key_id, route, target, fields) VALUES (?,?,?,?,?)`,
			at, a.KeyID, a.Route, a.Target, strings.Join(a.Fields, ",")); err != nil {
			return fmt.Errorf("sqlite: add admin action: %w", wrapErr(err))
		}
		return nil
	})
}

// ListAdminActions returns up to limit admin actions, newest first.
func (s *Store) ListAdminActions(ctx context.Context, limit int) ([]store.AdminAction, error) {
	limit = store.ListLimit(limit)
	rows, err := s.rquery(ctx, `SELECT id, at, key_id, route, target, fields FROM admin_audit
		ORDER BY id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list admin actions: %w", wrapErr(err))
	}
	defer rows.Close()
	var out []store.AdminAction
	for rows.Next() {
		var a store.AdminAction
		var at int64
		var fields string
		if err := rows.Scan(&a.ID, &at, &a.KeyID, &a.Route, &a.Target, &fields); err != nil {
			return nil, fmt.Errorf("sqlite: list admin actions: %w", wrapErr(err))
		}
		a.At, a.Fields = fromMS(at), splitFields(fields)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list admin actions: %w", wrapErr(err))
	}
	return out, nil
}

func splitFields(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}
