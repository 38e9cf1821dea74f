package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// messageColsOfM is messageCols qualified by the alias m.
var messageColsOfM = func() string {
	cols := strings.Split(messageCols, ",")
	for i, c := range cols {
		cols[i] = "m." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}()

// FindMessages looks messages up by wamid and by msg_id. Each list is
// passed as one JSON array that SQLite walks (json_each), probing the
// unique index for each value: an IN list of bound parameters would cost a
// C string copy per value and a temporary b-tree of the values to probe
// from, most of the lookup's time when, as for receipts of messages sent
// elsewhere, nothing matches.
func (s *Store) FindMessages(ctx context.Context, wamids, msgIDs []string) ([]wamux.Message, error) {
	var out []wamux.Message
	seen := map[string]bool{}
	for _, q := range []struct {
		col  string
		vals []string
	}{{"wamid", wamids}, {"msg_id", msgIDs}} {
		if len(q.vals) == 0 {
			continue
		}
		// JSON carries only valid UTF-8 (json.Marshal turns other bytes
		// into U+FFFD, which would miss the stored id and match another):
		// such values are looked up one by one.
		vals := make([]string, 0, len(q.vals))
		for _, v := range q.vals {
			if utf8.ValidString(v) {
				vals = append(vals, v)
				continue
			}
			m, err := s.getMessage(ctx, q.col, v)
			if wamux.ErrorCode(err) == wamux.ENotFound {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("sqlite: find messages: %w", err)
			}
			if !seen[m.ID] {
				seen[m.ID] = true
				out = append(out, m)
			}
		}
		if len(vals) == 0 {
			continue
		}
		list, err := json.Marshal(vals)
		if err != nil {
			return nil, fmt.Errorf("sqlite: find messages: %w", err)
		}
		res, err := s.rquery(ctx, `SELECT `+messageColsOfM+` FROM json_each(?) AS j
			CROSS JOIN messages AS m ON m.`+q.col+` = j.value`, string(list))
		if err != nil {
			return nil, fmt.Errorf("sqlite: find messages: %w", wrapErr(err))
		}
		for res.Next() {
			m, err := scanMessage(res)
			if err != nil {
				res.Close()
				return nil, fmt.Errorf("sqlite: find messages: %w", err)
			}
			if !seen[m.ID] {
				seen[m.ID] = true
				out = append(out, m)
			}
		}
		if err := res.Err(); err != nil {
			res.Close()
			return nil, fmt.Errorf("sqlite: find messages: %w", wrapErr(err))
		}
		res.Close()
	}
	return out, nil
}

// AddInboundMessages inserts with ON CONFLICT DO NOTHING; the rows changed
// are the new ones.
func (s *Store) AddInboundMessages(ctx context.Context, msgs []store.InboundMessage) (int, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	for i := range msgs {
		if msgs[i].AccountID == "" || msgs[i].WAMID == "" {
			return 0, wamux.Errorf(wamux.EInvalid, "inbound message %d needs account_id and wamid", i)
		}
	}
	now := ms(s.now())
	var added int
	err := s.write(ctx, func(w *writeTx) error {
		added = 0
		for i := range msgs {
			m := &msgs[i]
			received := ms(m.ReceivedAt)
			if received == 0 {
				received = now
			}
			res, err := w.exec(`INSERT INTO inbound_messages (account_id, wamid, type, sent_at, received_at, sender, data)
				VALUES (?,?,?,?,?,?,?) ON CONFLICT DO NOTHING`, m.AccountID, m.WAMID, m.Type, ms(m.SentAt), received,
				m.From, string(m.Data))
			if err != nil {
				return fmt.Errorf("sqlite: add inbound messages: %w", wrapErr(err))
			}
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("sqlite: add inbound messages: %w", err)
			}
			added += int(n)
		}
		return nil
	})
	return added, err
}
