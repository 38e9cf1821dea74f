package sqlite

import (
	"strings"
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// The queue restores list active statuses per account; if the query and
// the partial index's clause drift apart, SQLite silently falls back to a
// scan of every message ever sent, which only shows as a slow restart.
func TestListMessagesUsesActiveIndex(t *testing.T) {
	s := openInternal(t)
	plan := func(f store.MessageFilter) string {
		q, args := listMessagesQuery(f)
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
	for _, f := range []store.MessageFilter{
		{AccountID: "a1", Statuses: []wamux.Status{wamux.StatusWaitingSeq}},
		{AccountID: "a1", Statuses: []wamux.Status{wamux.StatusQueued, wamux.StatusUnknown}},
		{Statuses: []wamux.Status{wamux.StatusSending}},
	} {
		if p := plan(f); !strings.Contains(p, "messages_active") {
			t.Errorf("%v: plan %q does not use messages_active", f.Statuses, p)
		}
	}
	// A terminal status is not in the index; using it would miss rows.
	if p := plan(store.MessageFilter{AccountID: "a1", Statuses: []wamux.Status{wamux.StatusQueued, wamux.StatusRead}}); strings.Contains(p, "messages_active") {
		t.Errorf("plan %q uses the partial index for a terminal status", p)
	}
	var sql string
	if err := s.rdb.QueryRowContext(t.Context(), `SELECT sql FROM sqlite_master WHERE name = 'messages_active'`).Scan(&sql); err != nil {
		t.Fatalf("read index: %v", err)
	}
	if !strings.HasSuffix(strings.TrimSpace(sql), "WHERE "+activeStatusesSQL) {
		t.Errorf("index %q does not end in WHERE %s", sql, activeStatusesSQL)
	}
}

// The window loads read the backlog through the partial indexes of
// migration 0160, in the index's order: a query that drifts from an
// index's clause would sort the whole backlog on every load.
func TestListQueueUsesQueueIndexes(t *testing.T) {
	s := openInternal(t)
	plan := func(q string, args ...any) string {
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
	for _, c := range []struct {
		f     store.QueueFilter
		index string
	}{
		{store.QueueFilter{AccountID: "a"}, "messages_queued "},
		{store.QueueFilter{AccountID: "a", ExceptRecipients: []string{"+1"}}, "messages_queued "},
		{store.QueueFilter{AccountID: "a", Sequenced: true}, "messages_queued_seq"},
		{store.QueueFilter{AccountID: "a", Recipient: "+1"}, "messages_queued_to"},
	} {
		q, args, err := listQueueQuery(c.f)
		if err != nil {
			t.Fatal(err)
		}
		p := plan(q, args...)
		if !strings.Contains(p, "USING INDEX "+c.index) || strings.Contains(p, "TEMP B-TREE FOR ORDER BY") {
			t.Errorf("%+v: plan %q does not read %s in order", c.f, p, c.index)
		}
	}
	for _, clause := range []string{queuedPlainSQL, queuedSeqSQL} {
		p := plan(`SELECT priority, count(*) FROM messages WHERE account_id = ? AND `+clause+` GROUP BY priority`, "a")
		if !strings.Contains(p, "COVERING INDEX") {
			t.Errorf("count over %q: plan %q reads the table", clause, p)
		}
	}
}
