package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// eventCols reads an event with its message's fixed fields; the query
// joins events e with messages m.
const eventCols = `e.id, e.type, e.account_id, e.msg_id, e.status, e.previous_status, e.wamid, e.detail,
	e.until_at, e.data, e.created_at, COALESCE(m.recipient, ''), COALESCE(m.biz_type, ''), COALESCE(m.client_seq, 0)`

const eventJoin = ` LEFT JOIN messages m ON e.msg_id <> '' AND m.msg_id = e.msg_id`

func scanEvent(sc scanner, extra ...any) (wamux.Event, error) {
	var e wamux.Event
	var typ, data string
	var until, created int64
	dest := append([]any{&e.ID, &typ, &e.AccountID, &e.MsgID, &e.Status, &e.PreviousStatus, &e.WAMID, &e.Detail,
		&until, &data, &created, &e.To, &e.BizType, &e.ClientSeq}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return wamux.Event{}, err
	}
	e.Type, e.Until, e.CreatedAt = wamux.EventType(typ), fromMS(until), fromMS(created)
	if data != "" {
		e.Data = []byte(data)
	}
	e.Cursor = strconv.FormatInt(e.ID, 10)
	return e, nil
}

// parseCursor reads a feed cursor: the id of the last event read.
func parseCursor(c string) (int64, error) {
	if c == "" {
		return 0, nil
	}
	id, err := strconv.ParseInt(c, 10, 64)
	if err != nil || id < 0 {
		return 0, wamux.Errorf(wamux.EInvalid, "cursor %q is not one this store handed out", c)
	}
	return id, nil
}

// ListEvents reads events by id: the single writer assigns ids in commit
// order, so a committed event never appears behind a cursor.
func (s *Store) ListEvents(ctx context.Context, after string, limit int) ([]wamux.Event, string, error) {
	id, err := parseCursor(after)
	if err != nil {
		return nil, after, err
	}
	var out []wamux.Event
	err = s.scanAll(ctx, `SELECT `+eventCols+` FROM events e`+eventJoin+` WHERE e.id > ? ORDER BY e.id LIMIT ?`,
		[]any{id, store.ListLimit(limit)}, func(rows *sql.Rows) error {
			e, err := scanEvent(rows)
			out = append(out, e)
			return err
		})
	if err != nil {
		return nil, after, fmt.Errorf("sqlite: list events: %w", err)
	}
	if len(out) == 0 {
		return nil, after, nil
	}
	return out, out[len(out)-1].Cursor, nil
}

// EventCursorAt returns the id before the first event created at or after t.
func (s *Store) EventCursorAt(ctx context.Context, t time.Time) (string, error) {
	var id int64
	err := s.rqueryRow(ctx, `SELECT COALESCE((SELECT MIN(id) FROM events WHERE created_at >= ?),
		(SELECT COALESCE(MAX(id), 0) + 1 FROM events)) - 1`, ms(t)).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("sqlite: event cursor: %w", wrapErr(err))
	}
	return strconv.FormatInt(id, 10), nil
}

// PruneEvents deletes the oldest events and the deliveries left without one.
func (s *Store) PruneEvents(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.write(ctx, func(w *writeTx) error {
		res, err := w.exec(`DELETE FROM events WHERE id IN (SELECT id FROM events WHERE created_at < ? ORDER BY created_at LIMIT ?)`,
			ms(before), store.ListLimit(limit))
		if err != nil {
			return fmt.Errorf("sqlite: prune events: %w", wrapErr(err))
		}
		if n, err = res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		if _, err := w.exec(`DELETE FROM deliveries WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = deliveries.event_id)`); err != nil {
			return fmt.Errorf("sqlite: prune deliveries: %w", wrapErr(err))
		}
		return nil
	})
	return int(n), err
}

const subscriptionCols = `id, url, events, account_ids, description, state, state_reason, secret, old_secret,
	old_secret_until, cursor, created_at, updated_at`

func scanSubscription(sc scanner) (wamux.Subscription, error) {
	var sub wamux.Subscription
	var events, accounts, state string
	var oldUntil, created, updated int64
	if err := sc.Scan(&sub.ID, &sub.URL, &events, &accounts, &sub.Description, &state, &sub.StateReason, &sub.Secret,
		&sub.OldSecret, &oldUntil, &sub.Cursor, &created, &updated); err != nil {
		return wamux.Subscription{}, err
	}
	sub.Events, sub.AccountIDs, sub.State = store.SplitEventTypes(events), store.SplitList(accounts), wamux.SubscriptionState(state)
	sub.OldSecretUntil, sub.CreatedAt, sub.UpdatedAt = fromMS(oldUntil), fromMS(created), fromMS(updated)
	return sub, nil
}

// CreateSubscription stores sub with its cursor at the feed's head.
func (s *Store) CreateSubscription(ctx context.Context, sub wamux.Subscription) (wamux.Subscription, error) {
	if err := store.ValidateSubscription(sub); err != nil {
		return wamux.Subscription{}, err
	}
	var out wamux.Subscription
	err := s.write(ctx, func(w *writeTx) error {
		var head int64
		if _, err := w.queryRow(`SELECT COALESCE(MAX(id), 0) FROM events`, nil, &head); err != nil {
			return fmt.Errorf("sqlite: create subscription: %w", wrapErr(err))
		}
		now := ms(s.now())
		rows, err := w.query(`INSERT INTO subscriptions (`+subscriptionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING RETURNING `+subscriptionCols,
			sub.ID, sub.URL, store.JoinEventTypes(sub.Events), strings.Join(sub.AccountIDs, ","), sub.Description,
			string(sub.State), sub.StateReason, sub.Secret, sub.OldSecret, ms(sub.OldSecretUntil),
			strconv.FormatInt(head, 10), now, now)
		if err != nil {
			return fmt.Errorf("sqlite: create subscription: %w", wrapErr(err))
		}
		defer rows.Close()
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return fmt.Errorf("sqlite: create subscription: %w", wrapErr(err))
			}
			return wamux.Errorf(wamux.EConflict, "subscription %q exists", sub.ID)
		}
		if out, err = scanSubscription(rows); err != nil {
			return fmt.Errorf("sqlite: create subscription: %w", err)
		}
		return rows.Close()
	})
	return out, err
}

// GetSubscription returns one subscription.
func (s *Store) GetSubscription(ctx context.Context, id string) (wamux.Subscription, error) {
	sub, err := scanSubscription(s.rqueryRow(ctx, `SELECT `+subscriptionCols+` FROM subscriptions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return wamux.Subscription{}, wamux.Errorf(wamux.ENotFound, "subscription %q not found", id)
	}
	if err != nil {
		return wamux.Subscription{}, fmt.Errorf("sqlite: get subscription: %w", wrapErr(err))
	}
	return sub, nil
}

// ListSubscriptions returns every subscription by id.
func (s *Store) ListSubscriptions(ctx context.Context) ([]wamux.Subscription, error) {
	var out []wamux.Subscription
	err := s.scanAll(ctx, `SELECT `+subscriptionCols+` FROM subscriptions ORDER BY id`, nil, func(rows *sql.Rows) error {
		sub, err := scanSubscription(rows)
		out = append(out, sub)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: list subscriptions: %w", err)
	}
	return out, nil
}

// UpdateSubscription applies p.
func (s *Store) UpdateSubscription(ctx context.Context, id string, p store.SubscriptionPatch) (wamux.Subscription, error) {
	if err := store.ValidateSubscriptionPatch(p); err != nil {
		return wamux.Subscription{}, err
	}
	var out wamux.Subscription
	err := s.write(ctx, func(w *writeTx) error {
		c := store.SubscriptionColumns(p)
		now := ms(s.now())
		rows, err := w.query(`UPDATE subscriptions SET
				url = COALESCE(?, url), events = COALESCE(?, events), account_ids = COALESCE(?, account_ids),
				description = COALESCE(?, description), state = COALESCE(?, state),
				state_reason = COALESCE(?, state_reason), secret = COALESCE(?, secret),
				old_secret = COALESCE(?, old_secret), old_secret_until = COALESCE(?, old_secret_until),
				cursor = COALESCE(?, cursor), updated_at = ?
			WHERE id = ? RETURNING `+subscriptionCols,
			c.URL, c.Events, c.AccountIDs, c.Description, c.State, c.StateReason, c.Secret, c.OldSecret,
			msPtr(p.OldSecretUntil), c.Cursor, now, id)
		if err != nil {
			return fmt.Errorf("sqlite: update subscription: %w", wrapErr(err))
		}
		defer rows.Close()
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return fmt.Errorf("sqlite: update subscription: %w", wrapErr(err))
			}
			return wamux.Errorf(wamux.ENotFound, "subscription %q not found", id)
		}
		if out, err = scanSubscription(rows); err != nil {
			return fmt.Errorf("sqlite: update subscription: %w", err)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("sqlite: update subscription: %w", wrapErr(err))
		}
		if p.State != nil && *p.State == wamux.SubscriptionActive {
			if _, err := w.exec(`UPDATE deliveries SET next_at = ?, first_failed_at = 0, attempts = 0 WHERE subscription_id = ?`,
				now, id); err != nil {
				return fmt.Errorf("sqlite: reschedule deliveries: %w", wrapErr(err))
			}
		}
		return nil
	})
	return out, err
}

func msPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return ms(*t)
}

// DeleteSubscription removes a subscription and its deliveries.
func (s *Store) DeleteSubscription(ctx context.Context, id string) error {
	return s.write(ctx, func(w *writeTx) error {
		res, err := w.exec(`DELETE FROM subscriptions WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("sqlite: delete subscription: %w", wrapErr(err))
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("sqlite: delete subscription: %w", err)
		} else if n == 0 {
			return wamux.Errorf(wamux.ENotFound, "subscription %q not found", id)
		}
		if _, err := w.exec(`DELETE FROM deliveries WHERE subscription_id = ?`, id); err != nil {
			return fmt.Errorf("sqlite: delete deliveries: %w", wrapErr(err))
		}
		return nil
	})
}

// maxDeliveryRows keeps a multi-row statement under SQLite's variable limit.
const maxDeliveryRows = 1000

// EnqueueDeliveries adds deliveries and moves the cursor, compare-and-set.
func (s *Store) EnqueueDeliveries(ctx context.Context, subID, from, to string, ds []store.Delivery) (bool, error) {
	var moved bool
	err := s.write(ctx, func(w *writeTx) error {
		res, err := w.exec(`UPDATE subscriptions SET cursor = ? WHERE id = ? AND cursor = ?`, to, subID, from)
		if err != nil {
			return fmt.Errorf("sqlite: move subscription cursor: %w", wrapErr(err))
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 {
			return err
		}
		moved = true
		for start := 0; start < len(ds); start += maxDeliveryRows {
			chunk := ds[start:min(start+maxDeliveryRows, len(ds))]
			args := make([]any, 0, 4*len(chunk))
			for _, d := range chunk {
				args = append(args, subID, d.EventID, d.OrderKey, ms(d.NextAt))
			}
			q := multiInsert(`INSERT INTO deliveries (subscription_id, event_id, order_key, next_at) VALUES `, 4, len(chunk),
				` ON CONFLICT DO NOTHING`)
			if _, err := w.exec(q, args...); err != nil {
				return fmt.Errorf("sqlite: enqueue deliveries: %w", wrapErr(err))
			}
		}
		return nil
	})
	return moved, err
}

// DueDeliveries reads due deliveries in event order, each the first of its
// order key, with their events.
func (s *Store) DueDeliveries(ctx context.Context, subID string, now time.Time, limit int) ([]store.Delivery, error) {
	var out []store.Delivery
	err := s.scanAll(ctx, `SELECT `+eventCols+`, d.order_key, d.attempts, d.next_at, d.first_failed_at, d.last_error
		FROM deliveries d JOIN events e ON e.id = d.event_id`+eventJoin+`
		WHERE d.subscription_id = ? AND d.next_at <= ?
			AND NOT EXISTS (SELECT 1 FROM deliveries p
				WHERE p.subscription_id = d.subscription_id AND p.order_key = d.order_key AND p.event_id < d.event_id)
		ORDER BY d.event_id LIMIT ?`, []any{subID, ms(now), store.ListLimit(limit)}, func(rows *sql.Rows) error {
		var d store.Delivery
		var next, failed int64
		e, err := scanEvent(rows, &d.OrderKey, &d.Attempts, &next, &failed, &d.LastError)
		d.Event, d.EventID, d.NextAt, d.FirstFailedAt = e, e.ID, fromMS(next), fromMS(failed)
		out = append(out, d)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: due deliveries: %w", err)
	}
	return out, nil
}

// SettleDeliveries deletes the delivered and reschedules the rest.
func (s *Store) SettleDeliveries(ctx context.Context, subID string, done []int64, retry []store.Delivery) error {
	if len(done) == 0 && len(retry) == 0 {
		return nil
	}
	return s.write(ctx, func(w *writeTx) error {
		for start := 0; start < len(done); start += maxDeliveryRows {
			chunk := done[start:min(start+maxDeliveryRows, len(done))]
			args := make([]any, 0, len(chunk)+1)
			args = append(args, subID)
			for _, id := range chunk {
				args = append(args, id)
			}
			if _, err := w.exec(`DELETE FROM deliveries WHERE subscription_id = ? AND event_id IN (`+placeholders(len(chunk))+`)`,
				args...); err != nil {
				return fmt.Errorf("sqlite: settle deliveries: %w", wrapErr(err))
			}
		}
		for _, d := range retry {
			if _, err := w.exec(`UPDATE deliveries SET attempts = ?, next_at = ?, first_failed_at = ?, last_error = ?
				WHERE subscription_id = ? AND event_id = ?`,
				d.Attempts, ms(d.NextAt), ms(d.FirstFailedAt), d.LastError, subID, d.EventID); err != nil {
				return fmt.Errorf("sqlite: reschedule delivery: %w", wrapErr(err))
			}
		}
		return nil
	})
}

// DeliveryBacklog counts a subscription's pending deliveries.
func (s *Store) DeliveryBacklog(ctx context.Context, subID string) (int, time.Time, error) {
	var n int
	var oldest int64
	err := s.rqueryRow(ctx, `SELECT COUNT(*), COALESCE(MIN(e.created_at), 0)
		FROM deliveries d JOIN events e ON e.id = d.event_id WHERE d.subscription_id = ?`, subID).Scan(&n, &oldest)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("sqlite: delivery backlog: %w", wrapErr(err))
	}
	return n, fromMS(oldest), nil
}
