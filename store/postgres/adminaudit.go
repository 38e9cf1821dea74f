package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux/store"
)

// AddAdminAction records one admin action.
func (s *Store) AddAdminAction(ctx context.Context, a store.AdminAction) error {
	at := ms(a.At)
	if at == 0 {
		at = ms(s.now())
	}
	return s.inTx(ctx, "add admin action", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO admin_audit (at, key_id, route, target, fields) VALUES ($1,$2,$3,$4,$5)`,
			at, a.KeyID, a.Route, a.Target, strings.Join(a.Fields, ","))
		return err
	})
}

// ListAdminActions returns up to limit admin actions, newest first.
func (s *Store) ListAdminActions(ctx context.Context, limit int) ([]store.AdminAction, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	limit = store.ListLimit(limit)
	rows, err := s.pool.Query(ctx, `SELECT id, at, key_id, route, target, fields FROM admin_audit
		ORDER BY id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: list admin actions: %w", wrapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.AdminAction, error) {
		var a store.AdminAction
		var at int64
		var fields string
		err := row.Scan(&a.ID, &at, &a.KeyID, &a.Route, &a.Target, &fields)
		a.At, a.Fields = fromMS(at), []string{}
		if fields != "" {
			a.Fields = strings.Split(fields, ",")
		}
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list admin actions: %w", wrapErr(err))
	}
	return out, nil
}
