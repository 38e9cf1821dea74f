package sqlite

import (
	"strings"
	"sync"
)

// padRows rounds a row count up to a power of two, so multi-row statements
// come in few sizes and each size is prepared once.
func padRows(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

type sqlKey struct {
	prefix, suffix string
	cols, rows     int
}

// sqlTexts memoises generated statement text; building a 20,000-placeholder
// string per call would cost more than the cached statement saves.
var sqlTexts sync.Map // sqlKey → string

// multiInsert builds prefix + (?,…),(?,…)… + suffix for rows rows of cols
// columns.
func multiInsert(prefix string, cols, rows int, suffix string) string {
	k := sqlKey{prefix, suffix, cols, rows}
	if q, ok := sqlTexts.Load(k); ok {
		return q.(string)
	}
	row := "(" + placeholders(cols) + ")"
	var b strings.Builder
	b.Grow(len(prefix) + len(suffix) + rows*(len(row)+1))
	b.WriteString(prefix)
	for i := 0; i < rows; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	b.WriteString(suffix)
	q := b.String()
	sqlTexts.Store(k, q)
	return q
}

// placeholders returns "?,?,…" with n marks.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?,", n-1) + "?"
}
