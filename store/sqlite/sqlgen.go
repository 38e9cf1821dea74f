package sqlite

import (
	"strconv"
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

type sharedKey struct {
	prefix, suffix string
	cols, rows     int
	shared         uint32
}

var sharedTexts sync.Map // sharedKey → string

// sharedInsert builds a multi-row INSERT in which the columns set in the
// shared bit mask take one value for every row. Those are bound once as
// ?1…?k and every row refers to them, so a batch from one account binds
// its account_id once instead of once per row; binding is a large part of
// an insert's cost. The first row numbers its other values explicitly
// (?k+1, …); later rows use a bare "?", which SQLite numbers on from the
// largest number so far. Arguments go shared values first (in column
// order), then each row's other values.
func sharedInsert(prefix string, cols int, shared uint32, rows int, suffix string) string {
	k := sharedKey{prefix, suffix, cols, rows, shared}
	if q, ok := sharedTexts.Load(k); ok {
		return q.(string)
	}
	sharedNum := make([]int, cols)
	n := 0
	for c := 0; c < cols; c++ {
		if shared&(1<<c) != 0 {
			n++
			sharedNum[c] = n
		}
	}
	var first, rest strings.Builder
	first.WriteByte('(')
	rest.WriteByte('(')
	next := n
	for c := 0; c < cols; c++ {
		if c > 0 {
			first.WriteByte(',')
			rest.WriteByte(',')
		}
		if sharedNum[c] > 0 {
			ref := "?" + strconv.Itoa(sharedNum[c])
			first.WriteString(ref)
			rest.WriteString(ref)
			continue
		}
		next++
		first.WriteString("?" + strconv.Itoa(next))
		rest.WriteByte('?')
	}
	first.WriteByte(')')
	rest.WriteByte(')')
	var b strings.Builder
	b.Grow(len(prefix) + len(suffix) + first.Len() + rows*(rest.Len()+1))
	b.WriteString(prefix)
	b.WriteString(first.String())
	for i := 1; i < rows; i++ {
		b.WriteByte(',')
		b.WriteString(rest.String())
	}
	b.WriteString(suffix)
	q := b.String()
	sharedTexts.Store(k, q)
	return q
}
