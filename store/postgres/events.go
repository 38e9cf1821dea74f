package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// eventCols reads an event with its feed position and its message's fixed
// fields; the query joins events e with messages m.
const eventCols = `e.id, e.txid::text, e.type, e.account_id, e.msg_id, e.status, e.previous_status, e.wamid, e.detail,
	e.until_at, e.data, e.created_at, COALESCE(m.recipient, ''), COALESCE(m.biz_type, ''), COALESCE(m.client_seq, 0)`

const eventJoin = ` LEFT JOIN messages m ON e.msg_id <> '' AND m.msg_id = e.msg_id`

// readable is the condition for an event to be listed: every transaction
// that could still write an event before it in (txid, id) order has ended.
const readable = `e.txid < pg_snapshot_xmin(pg_current_snapshot())`

func scanEvent(row pgx.Row, extra ...any) (wamux.Event, error) {
	var e wamux.Event
	var txid, typ, data string
	var until, created int64
	dest := append([]any{&e.ID, &txid, &typ, &e.AccountID, &e.MsgID, &e.Status, &e.PreviousStatus, &e.WAMID,
		&e.Detail, &until, &data, &created, &e.To, &e.BizType, &e.ClientSeq}, extra...)
	if err := row.Scan(dest...); err != nil {
		return wamux.Event{}, err
	}
	e.Type, e.Until, e.CreatedAt = wamux.EventType(typ), fromMS(until), fromMS(created)
	if data != "" {
		e.Data = []byte(data)
	}
	e.Cursor = txid + ":" + strconv.FormatInt(e.ID, 10)
	return e, nil
}

// parseCursor reads a feed cursor "txid:id"; "" is before every event.
func parseCursor(c string) (txid uint64, id int64, err error) {
	if c == "" {
		return 0, 0, nil
	}
	x, i, ok := strings.Cut(c, ":")
	if ok {
		txid, err = strconv.ParseUint(x, 10, 64)
	}
	if ok && err == nil {
		id, err = strconv.ParseInt(i, 10, 64)
	}
	if !ok || err != nil || id < 0 {
		return 0, 0, wamux.Errorf(wamux.EInvalid, "cursor %q is not one this store handed out", c)
	}
	return txid, id, nil
}

// ListEvents reads events in (txid, id) order, only those no running
// transaction can precede.
func (s *Store) ListEvents(ctx context.Context, after string, limit int) ([]wamux.Event, string, error) {
	txid, id, err := parseCursor(after)
	if err != nil {
		return nil, after, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+eventCols+` FROM events e`+eventJoin+`
		WHERE (e.txid, e.id) > ($1::text::xid8, $2) AND `+readable+` ORDER BY e.txid, e.id LIMIT $3`,
		strconv.FormatUint(txid, 10), id, store.ListLimit(limit))
	if err != nil {
		return nil, after, fmt.Errorf("postgres: list events: %w", wrapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (wamux.Event, error) { return scanEvent(r) })
	if err != nil {
		return nil, after, fmt.Errorf("postgres: list events: %w", wrapErr(err))
	}
	if len(out) == 0 {
		return nil, after, nil
	}
	return out, out[len(out)-1].Cursor, nil
}

// headCursor is the position after every readable event and before every
// event a running transaction may still commit.
const headCursor = `SELECT pg_snapshot_xmin(pg_current_snapshot())::text || ':0'`

// EventCursorAt returns the position before the first event created at or
// after t.
func (s *Store) EventCursorAt(ctx context.Context, t time.Time) (string, error) {
	var c string
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(
		(SELECT e.txid::text || ':' || (e.id - 1) FROM events e WHERE e.created_at >= $1 ORDER BY e.txid, e.id LIMIT 1),
		(`+headCursor+`))`, ms(t)).Scan(&c)
	if err != nil {
		return "", fmt.Errorf("postgres: event cursor: %w", wrapErr(err))
	}
	return c, nil
}

// PruneEvents deletes the oldest events and the deliveries left without one.
func (s *Store) PruneEvents(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM events WHERE id IN
			(SELECT id FROM events WHERE created_at < $1 ORDER BY created_at LIMIT $2)`, ms(before), store.ListLimit(limit))
		if err != nil {
			return err
		}
		if n = tag.RowsAffected(); n == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `DELETE FROM deliveries d WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = d.event_id)`)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: prune events: %w", wrapErr(err))
	}
	return int(n), nil
}

const subscriptionCols = `id, url, events, account_ids, description, state, state_reason, secret, old_secret,
	old_secret_until, cursor, created_at, updated_at`

func scanSubscription(row pgx.Row) (wamux.Subscription, error) {
	var sub wamux.Subscription
	var events, accounts, state string
	var oldUntil, created, updated int64
	if err := row.Scan(&sub.ID, &sub.URL, &events, &accounts, &sub.Description, &state, &sub.StateReason, &sub.Secret,
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
	if !storable(sub.ID) || !storable(sub.URL) || !storable(sub.Description) {
		return wamux.Subscription{}, wamux.Errorf(wamux.EInvalid, "subscription fields must be UTF-8 text without NUL")
	}
	now := ms(s.now())
	out, err := scanSubscription(s.pool.QueryRow(ctx, `INSERT INTO subscriptions (`+subscriptionCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, (`+headCursor+`), $11, $11)
		ON CONFLICT DO NOTHING RETURNING `+subscriptionCols,
		sub.ID, sub.URL, store.JoinEventTypes(sub.Events), strings.Join(sub.AccountIDs, ","), sub.Description,
		string(sub.State), sub.StateReason, sub.Secret, sub.OldSecret, ms(sub.OldSecretUntil), now))
	if errors.Is(err, pgx.ErrNoRows) {
		return wamux.Subscription{}, wamux.Errorf(wamux.EConflict, "subscription %q exists", sub.ID)
	}
	if err != nil {
		return wamux.Subscription{}, fmt.Errorf("postgres: create subscription: %w", wrapErr(err))
	}
	return out, nil
}

// GetSubscription returns one subscription.
func (s *Store) GetSubscription(ctx context.Context, id string) (wamux.Subscription, error) {
	if !storable(id) {
		return wamux.Subscription{}, wamux.Errorf(wamux.ENotFound, "subscription %q not found", id)
	}
	sub, err := scanSubscription(s.pool.QueryRow(ctx, `SELECT `+subscriptionCols+` FROM subscriptions WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return wamux.Subscription{}, wamux.Errorf(wamux.ENotFound, "subscription %q not found", id)
	}
	if err != nil {
		return wamux.Subscription{}, fmt.Errorf("postgres: get subscription: %w", wrapErr(err))
	}
	return sub, nil
}

// ListSubscriptions returns every subscription by id.
func (s *Store) ListSubscriptions(ctx context.Context) ([]wamux.Subscription, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+subscriptionCols+` FROM subscriptions ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list subscriptions: %w", wrapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (wamux.Subscription, error) { return scanSubscription(r) })
	if err != nil {
		return nil, fmt.Errorf("postgres: list subscriptions: %w", wrapErr(err))
	}
	return out, nil
}

// UpdateSubscription applies p.
func (s *Store) UpdateSubscription(ctx context.Context, id string, p store.SubscriptionPatch) (wamux.Subscription, error) {
	if err := store.ValidateSubscriptionPatch(p); err != nil {
		return wamux.Subscription{}, err
	}
	if !storable(id) {
		return wamux.Subscription{}, wamux.Errorf(wamux.ENotFound, "subscription %q not found", id)
	}
	c := store.SubscriptionColumns(p)
	for _, v := range []*string{c.URL, c.Description, c.StateReason} {
		if v != nil && !storable(*v) {
			return wamux.Subscription{}, wamux.Errorf(wamux.EInvalid, "subscription fields must be UTF-8 text without NUL")
		}
	}
	var oldUntil *int64
	if p.OldSecretUntil != nil {
		v := ms(*p.OldSecretUntil)
		oldUntil = &v
	}
	now := ms(s.now())
	var out wamux.Subscription
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		out, err = scanSubscription(tx.QueryRow(ctx, `UPDATE subscriptions SET
				url = COALESCE($1, url), events = COALESCE($2, events), account_ids = COALESCE($3, account_ids),
				description = COALESCE($4, description), state = COALESCE($5, state),
				state_reason = COALESCE($6, state_reason), secret = COALESCE($7, secret),
				old_secret = COALESCE($8, old_secret), old_secret_until = COALESCE($9, old_secret_until),
				cursor = COALESCE($10, cursor), updated_at = $11
			WHERE id = $12 RETURNING `+subscriptionCols,
			c.URL, c.Events, c.AccountIDs, c.Description, c.State, c.StateReason, c.Secret, c.OldSecret,
			oldUntil, c.Cursor, now, id))
		if err != nil {
			return err
		}
		if p.State != nil && *p.State == wamux.SubscriptionActive {
			_, err = tx.Exec(ctx, `UPDATE deliveries SET next_at = $1, first_failed_at = 0, attempts = 0
				WHERE subscription_id = $2`, now, id)
		}
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return wamux.Subscription{}, wamux.Errorf(wamux.ENotFound, "subscription %q not found", id)
	}
	if err != nil {
		return wamux.Subscription{}, fmt.Errorf("postgres: update subscription: %w", wrapErr(err))
	}
	return out, nil
}

// DeleteSubscription removes a subscription and its deliveries.
func (s *Store) DeleteSubscription(ctx context.Context, id string) error {
	if !storable(id) {
		return wamux.Errorf(wamux.ENotFound, "subscription %q not found", id)
	}
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM subscriptions WHERE id = $1`, id)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		_, err = tx.Exec(ctx, `DELETE FROM deliveries WHERE subscription_id = $1`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: delete subscription: %w", wrapErr(err))
	}
	if n == 0 {
		return wamux.Errorf(wamux.ENotFound, "subscription %q not found", id)
	}
	return nil
}

// EnqueueDeliveries adds deliveries and moves the cursor, compare-and-set.
func (s *Store) EnqueueDeliveries(ctx context.Context, subID, from, to string, ds []store.Delivery) (bool, error) {
	var moved bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE subscriptions SET cursor = $1 WHERE id = $2 AND cursor = $3`, to, subID, from)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		moved = true
		if len(ds) == 0 {
			return nil
		}
		ids, keys, next := make([]int64, len(ds)), make([]string, len(ds)), make([]int64, len(ds))
		for i, d := range ds {
			ids[i], keys[i], next[i] = d.EventID, d.OrderKey, ms(d.NextAt)
		}
		_, err = tx.Exec(ctx, `INSERT INTO deliveries (subscription_id, event_id, order_key, next_at)
			SELECT $1, u.id, u.key, u.next FROM unnest($2::bigint[], $3::text[], $4::bigint[]) AS u(id, key, next)
			ON CONFLICT DO NOTHING`, subID, ids, keys, next)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("postgres: enqueue deliveries: %w", wrapErr(err))
	}
	return moved, nil
}

// DueDeliveries reads due deliveries in event order, each the first of its
// order key, with their events.
func (s *Store) DueDeliveries(ctx context.Context, subID string, now time.Time, limit int) ([]store.Delivery, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+eventCols+`, d.order_key, d.attempts, d.next_at, d.first_failed_at, d.last_error
		FROM deliveries d JOIN events e ON e.id = d.event_id`+eventJoin+`
		WHERE d.subscription_id = $1 AND d.next_at <= $2
			AND NOT EXISTS (SELECT 1 FROM deliveries p
				WHERE p.subscription_id = d.subscription_id AND p.order_key = d.order_key AND p.event_id < d.event_id)
		ORDER BY d.event_id LIMIT $3`, subID, ms(now), store.ListLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("postgres: due deliveries: %w", wrapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Delivery, error) {
		var d store.Delivery
		var attempts, next, failed int64
		e, err := scanEvent(r, &d.OrderKey, &attempts, &next, &failed, &d.LastError)
		d.Event, d.EventID, d.Attempts, d.NextAt, d.FirstFailedAt = e, e.ID, int(attempts), fromMS(next), fromMS(failed)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: due deliveries: %w", wrapErr(err))
	}
	return out, nil
}

// SettleDeliveries deletes the delivered and reschedules the rest.
func (s *Store) SettleDeliveries(ctx context.Context, subID string, done []int64, retry []store.Delivery) error {
	if len(done) == 0 && len(retry) == 0 {
		return nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if len(done) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM deliveries WHERE subscription_id = $1 AND event_id = ANY($2::bigint[])`,
				subID, done); err != nil {
				return err
			}
		}
		for _, d := range retry {
			if _, err := tx.Exec(ctx, `UPDATE deliveries SET attempts = $1, next_at = $2, first_failed_at = $3, last_error = $4
				WHERE subscription_id = $5 AND event_id = $6`,
				int64(d.Attempts), ms(d.NextAt), ms(d.FirstFailedAt), storableText(d.LastError), subID, d.EventID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: settle deliveries: %w", wrapErr(err))
	}
	return nil
}

// storableText replaces what PostgreSQL cannot keep in text (NUL, invalid
// UTF-8) in an error message from outside.
func storableText(v string) string {
	if storable(v) {
		return v
	}
	return strings.ToValidUTF8(strings.ReplaceAll(v, "\x00", ""), "\uFFFD")
}

// DeliveryBacklog counts a subscription's pending deliveries.
func (s *Store) DeliveryBacklog(ctx context.Context, subID string) (int, time.Time, error) {
	var n, oldest int64
	err := s.pool.QueryRow(ctx, `SELECT COUNT(*), COALESCE(MIN(e.created_at), 0)
		FROM deliveries d JOIN events e ON e.id = d.event_id WHERE d.subscription_id = $1`, subID).Scan(&n, &oldest)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("postgres: delivery backlog: %w", wrapErr(err))
	}
	return int(n), fromMS(oldest), nil
}
