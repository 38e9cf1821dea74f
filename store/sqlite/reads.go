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
