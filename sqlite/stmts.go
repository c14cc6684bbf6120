package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps prepared read statements: the hot reads of every request
// (a key, a step's state) would otherwise be parsed and planned by SQLite
// each time (about a tenth of a governed call's CPU, BENCHMARKS.md).
type stmtCache struct {
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

// readRow runs a one-row read through a cached prepared statement on the
// reader pool. database/sql re-prepares it on each pooled connection.
func (s *Store) readRow(ctx context.Context, query string, args ...any) *sql.Row {
	s.stmts.mu.Lock()
	st, ok := s.stmts.m[query]
	if !ok {
		var err error
		st, err = s.readers.PrepareContext(ctx, query)
		if err != nil {
			s.stmts.mu.Unlock()
			// Fall back to an unprepared query; it reports the same error.
			return s.readers.QueryRowContext(ctx, query, args...)
		}
		if s.stmts.m == nil {
			s.stmts.m = map[string]*sql.Stmt{}
		}
		s.stmts.m[query] = st
	}
	s.stmts.mu.Unlock()
	return st.QueryRowContext(ctx, args...)
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, st := range c.m {
		st.Close()
		delete(c.m, k)
	}
}
