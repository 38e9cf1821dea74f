package sqlite

import (
	"strings"
	"testing"

	"github.com/wamux/wamux/store"
)

// queryPlan is SQLite's plan for q, its steps joined by "; ".
func queryPlan(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	rows, err := s.rdb.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatalf("scan plan: %v", err)
		}
		out = append(out, detail)
	}
	return strings.Join(out, "; ")
}

// The inbound reads search an index and sort nothing: a scan would grow
// with every message customers ever wrote.
func TestInboundQueriesUseIndexes(t *testing.T) {
	s := openInternal(t)
	type query struct {
		name, q string
		args    []any
		index   string
	}
	customer, customerArgs := listInboundQuery(store.InboundFilter{AccountID: "a", From: "1"}, store.InboundCursor{SentAt: 5, WAMID: "w"}, true, 10)
	account, accountArgs := listInboundQuery(store.InboundFilter{AccountID: "a"}, store.InboundCursor{}, false, 10)
	for _, c := range []query{
		{"customer page", customer, customerArgs, "inbound_sender"},
		{"account page", account, accountArgs, "inbound_sent"},
		{"last", lastInboundQuery, []any{"a", "1"}, "inbound_sender"},
		{"last of the owner", lastOwnedQuery, []any{"1", "1"}, "inbound_sender"},
		{"prune", pruneInboundSelect, []any{1, 10}, "inbound_received"},
	} {
		p := queryPlan(t, s, c.q, c.args...)
		if !strings.Contains(p, "USING COVERING INDEX "+c.index) && !strings.Contains(p, "USING INDEX "+c.index) ||
			strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%s: plan %q, want %s without a sort", c.name, p, c.index)
		}
	}
}
