package sqlite

import (
	"context"
	"database/sql"
)

// readStmt returns the read pool's prepared statement for query, preparing
// it on first use. database/sql re-prepares it lazily on each pooled
// connection, so every connection parses each query once instead of on
// every call. Only queries from a bounded set of texts may come here.
func (s *Store) readStmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if s.isClosed() {
		return nil, errClosed
	}
	if st, ok := s.rstmts.Load(query); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := s.rdb.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.rstmts.LoadOrStore(query, st); loaded {
		_ = st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

func (s *Store) rquery(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := s.readStmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

func (s *Store) rqueryRow(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := s.readStmt(ctx, query)
	if err != nil {
		// QueryRowContext on the pool reports the same failure through
		// the Row, which is where callers look for it.
		return s.rdb.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// closeReadStmts releases the prepared statements before the pool closes.
func (s *Store) closeReadStmts() {
	s.rstmts.Range(func(k, v any) bool {
		_ = v.(*sql.Stmt).Close()
		s.rstmts.Delete(k)
		return true
	})
}

// queryKeyed runs a key lookup over the keys at positions idx, in chunks
// of at most maxKeyRows: text(rows) is the statement for a VALUES list of
// that many rows, row appends one key's values (for position j) to args,
// and scan reads one result row. Chunks are padded with copies of their
// last key so that few statement texts exist; a padded key answers twice,
// which scan must take (every caller files answers by position).
func (s *Store) queryKeyed(ctx context.Context, idx []int, text func(rows int) string,
	row func(args []any, j int) []any, scan func(*sql.Rows) error) error {
	for start := 0; start < len(idx); start += maxKeyRows {
		chunk := idx[start:min(start+maxKeyRows, len(idx))]
		n := padRows(len(chunk))
		var args []any
		for i := 0; i < n; i++ {
			args = row(args, chunk[min(i, len(chunk)-1)])
		}
		if err := s.scanAll(ctx, text(n), args, scan); err != nil {
			return err
		}
	}
	return nil
}

// scanAll runs a read query and hands every row to scan.
func (s *Store) scanAll(ctx context.Context, q string, args []any, scan func(*sql.Rows) error) error {
	rows, err := s.rquery(ctx, q, args...)
	if err != nil {
		return wrapErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return wrapErr(rows.Err())
}
