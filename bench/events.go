package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/events"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
)

// EventsConfig configures `wamux bench events`.
type EventsConfig struct {
	// Messages per round; each gets sent, delivered and read receipts.
	Messages int
	// Rounds alternate without and with a subscription (A/B/A/B…),
	// starting without; an even number, at least 2.
	Rounds int
	// Ceiling is the number of events written while the subscription is
	// disabled and then delivered at once: the deliverer's ceiling.
	Ceiling int
	// Batch receipts per Ingest call, from Callers concurrent callers.
	Batch   int
	Callers int
	// Store is "sqlite" (default, a temporary directory) or a PostgreSQL
	// URL (a fresh schema, dropped afterwards).
	Store string
	// Timeout bounds the wait for one round's or the ceiling's events.
	Timeout time.Duration
	Logger  *slog.Logger
}

func (c *EventsConfig) setDefaults() error {
	if c.Messages <= 0 {
		c.Messages = 2000
	}
	if c.Rounds == 0 {
		c.Rounds = 6
	}
	if c.Rounds < 2 || c.Rounds%2 != 0 {
		return fmt.Errorf("--rounds must be even and at least 2, got %d", c.Rounds)
	}
	if c.Ceiling < 0 {
		return fmt.Errorf("--ceiling must not be negative")
	}
	if c.Batch <= 0 {
		c.Batch = 100
	}
	if c.Callers <= 0 {
		c.Callers = 16
	}
	if c.Timeout <= 0 {
		c.Timeout = EventsTimeoutDefault
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// EventsRound is one round of the A/B alternation.
type EventsRound struct {
	Subscribed     bool    `json:"subscribed"`
	Receipts       int     `json:"receipts"`
	ElapsedSec     float64 `json:"elapsed_sec"`
	ReceiptsPerSec float64 `json:"receipts_per_sec"`
	// Events are the message.status events the round's receipts wrote;
	// Delivered those the receiver got (subscribed rounds).
	Events    int `json:"events"`
	Delivered int `json:"delivered"`
	// DrainSec is the time from the end of the round's receipts to the
	// receiver getting its last event (subscribed rounds).
	DrainSec float64 `json:"drain_sec"`
}

// EventsReport is what `wamux bench events` measured.
type EventsReport struct {
	Store            string `json:"store"`
	MessagesPerRound int    `json:"messages_per_round"`
	Batch            int    `json:"batch"`
	Callers          int    `json:"callers"`

	// Written counts the message.status events of the subscribed rounds,
	// from the outbox; Delivered the distinct ones the receiver got;
	// Missing those it did not.
	Written       int   `json:"events_written"`
	Delivered     int   `json:"events_delivered"`
	Missing       int   `json:"missing"`
	Duplicates    int64 `json:"duplicates"`
	BadSignatures int64 `json:"bad_signatures"`
	// EventsPerSec is the subscribed rounds' events over the time from
	// their first to their last arrival at the receiver.
	EventsPerSec float64 `json:"events_per_sec"`
	// LatencyP50Ms and LatencyP99Ms run from an event's commit (its
	// timestamp) to its arrival at the receiver, in the subscribed rounds.
	LatencyP50Ms float64 `json:"latency_p50_ms"`
	LatencyP99Ms float64 `json:"latency_p99_ms"`

	ReceiptsPerSecWith    float64       `json:"receipts_per_sec_with_subscription"`
	ReceiptsPerSecWithout float64       `json:"receipts_per_sec_without"`
	Ratio                 float64       `json:"ratio"`
	Rounds                []EventsRound `json:"rounds"`

	// The ceiling: Ceiling events written while the subscription was
	// disabled, then delivered from its activation until the receiver had
	// them all.
	CeilingEvents       int     `json:"ceiling_events"`
	CeilingSec          float64 `json:"ceiling_sec"`
	CeilingEventsPerSec float64 `json:"ceiling_events_per_sec"`
	CeilingMissing      int     `json:"ceiling_missing"`
}

// EventsTimeoutDefault is EventsConfig.Timeout when unset.
const EventsTimeoutDefault = 2 * time.Minute

// benchEventsAccount is the account of the benchmark's messages.
const benchEventsAccount = "bench-events"

// RunEvents measures event delivery on a gateway (app.App, the wiring of
// `wamux serve`): statuses fed through the receipt pipeline move messages
// forward, whose message.status events one subscription delivers to a
// local receiver (which checks signatures and answers 204). Rounds
// alternate without and with the subscription, so that receipts/s with
// it and without it share the machine's noise; then the ceiling of one
// subscription's deliverer: events written while it is disabled,
// delivered at once when it is made active.
func RunEvents(ctx context.Context, cfg EventsConfig) (EventsReport, error) {
	if err := cfg.setDefaults(); err != nil {
		return EventsReport{}, err
	}
	hc := HarnessConfig{Logger: cfg.Logger, EventAllowNetworks: "127.0.0.0/8", Store: cfg.Store}
	h, err := Start(ctx, hc)
	if err != nil {
		return EventsReport{}, err
	}
	defer h.Close()
	recv, err := startEventReceiver()
	if err != nil {
		return EventsReport{}, err
	}
	defer recv.Close()
	if err := h.AddAccount(ctx, benchEventsAccount, "1559990001", 1, 1, sim.Limits{Rate: 1}); err != nil {
		return EventsReport{}, err
	}
	rep := EventsReport{Store: "sqlite", MessagesPerRound: cfg.Messages, Batch: cfg.Batch, Callers: cfg.Callers}
	if cfg.Store != "" && cfg.Store != "sqlite" {
		rep.Store = "postgres"
	}
	wamids, err := insertAccepted(ctx, h.App.Store(), "r", cfg.Rounds*cfg.Messages)
	if err != nil {
		return rep, err
	}
	var lat []float64
	var span time.Duration
	var with, without []float64
	for r := range cfg.Rounds {
		round, l, s, err := eventsRound(ctx, h, recv, cfg, wamids[r*cfg.Messages:(r+1)*cfg.Messages], r%2 == 1, &rep)
		if err != nil {
			return rep, err
		}
		rep.Rounds = append(rep.Rounds, round)
		lat, span = append(lat, l...), span+s
		if round.Subscribed {
			with = append(with, round.ReceiptsPerSec)
		} else {
			without = append(without, round.ReceiptsPerSec)
		}
	}
	rep.ReceiptsPerSecWith, rep.ReceiptsPerSecWithout = mean(with), mean(without)
	if rep.ReceiptsPerSecWithout > 0 {
		rep.Ratio = rep.ReceiptsPerSecWith / rep.ReceiptsPerSecWithout
	}
	if span > 0 {
		rep.EventsPerSec = float64(rep.Delivered) / span.Seconds()
	}
	rep.LatencyP50Ms, rep.LatencyP99Ms = percentileOf(lat, 0.50), percentileOf(lat, 0.99)
	if cfg.Ceiling > 0 {
		if err := eventsCeiling(ctx, h, recv, cfg, &rep); err != nil {
			return rep, err
		}
	}
	c := recv.counts()
	rep.Duplicates, rep.BadSignatures = c.duplicates, c.badSignatures
	return rep, nil
}

// eventsRound feeds the sent, delivered and read receipts of one round's
// messages (each type in turn, so that a message's receipts fall in
// different batches and make an event each) and, when subscribed, waits
// for the receiver to have every event the round wrote. It returns the
// round, the latencies of its events and the span from their first to
// their last arrival.
func eventsRound(ctx context.Context, h *Harness, recv *eventReceiver, cfg EventsConfig, wamids []string, subscribed bool,
	rep *EventsReport) (EventsRound, []float64, time.Duration, error) {
	round := EventsRound{Subscribed: subscribed, Receipts: 3 * len(wamids)}
	subID, cursor, base := "", "", int64(0)
	if subscribed {
		var err error
		if subID, cursor, err = benchSubscription(ctx, h, recv); err != nil {
			return round, nil, 0, err
		}
		// Nothing reaches the receiver before the round's receipts.
		recv.takeLatencies()
		base = recv.counts().distinct
	} else {
		var err error
		if cursor, err = eventsHead(ctx, h.App.Store()); err != nil {
			return round, nil, 0, err
		}
	}
	t0 := time.Now().Add(-time.Hour)
	rs := make([]wamux.Receipt, 0, round.Receipts)
	for k, typ := range []wamux.ReceiptType{wamux.ReceiptSent, wamux.ReceiptDelivered, wamux.ReceiptRead} {
		for i, id := range wamids {
			rs = append(rs, wamux.Receipt{MessageID: id, AccountID: benchEventsAccount, Type: typ,
				EventTime: t0.Add(time.Duration(i)*time.Millisecond + time.Duration(k)*time.Minute)})
		}
	}
	p := h.App.Receipts()
	start := time.Now()
	err := feedReceipts(ctx, rs, cfg.Batch, cfg.Callers, func(ctx context.Context, b []wamux.Receipt) error {
		_, err := p.Ingest(ctx, "agent", b)
		return err
	})
	if err == nil {
		err = p.Flush(ctx)
	}
	fed := time.Now()
	if err != nil {
		return round, nil, 0, fmt.Errorf("bench events: feed receipts: %w", err)
	}
	round.ElapsedSec = fed.Sub(start).Seconds()
	round.ReceiptsPerSec = float64(round.Receipts) / round.ElapsedSec
	ids, err := settledEventIDs(ctx, h.App.Store(), cursor, cfg.Timeout)
	if err != nil {
		return round, nil, 0, err
	}
	round.Events = len(ids)
	if !subscribed {
		return round, nil, 0, nil
	}
	wait, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	select {
	case <-recv.expect(int(base) + len(ids)):
	case <-wait.Done():
	}
	lat, first, latest := recv.takeLatencies()
	missing := countMissing(recv, ids)
	round.Delivered = len(ids) - missing
	if !latest.IsZero() {
		round.DrainSec = max(0, latest.Sub(fed).Seconds())
	}
	rep.Written += len(ids)
	rep.Delivered += round.Delivered
	rep.Missing += missing
	if err := h.Do(ctx, "DELETE", "/v1/subscriptions/"+subID, nil, nil); err != nil {
		return round, nil, 0, err
	}
	return round, lat, latest.Sub(first), nil
}

// eventsCeiling writes cfg.Ceiling events (accepted statuses of new
// messages) while the subscription is disabled, then makes it active and
// times the receiver getting them all.
func eventsCeiling(ctx context.Context, h *Harness, recv *eventReceiver, cfg EventsConfig, rep *EventsReport) error {
	subID, cursor, err := benchSubscription(ctx, h, recv)
	if err != nil {
		return err
	}
	if err := h.Do(ctx, "PATCH", "/v1/subscriptions/"+subID, map[string]any{"state": "disabled"}, nil); err != nil {
		return err
	}
	if _, err := insertAccepted(ctx, h.App.Store(), "c", cfg.Ceiling); err != nil {
		return err
	}
	ids, err := settledEventIDs(ctx, h.App.Store(), cursor, cfg.Timeout)
	if err != nil {
		return err
	}
	recv.takeLatencies()
	before := recv.counts().distinct
	reached := recv.expect(int(before) + len(ids))
	start := time.Now()
	if err := h.Do(ctx, "PATCH", "/v1/subscriptions/"+subID, map[string]any{"state": "active"}, nil); err != nil {
		return err
	}
	wait, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	select {
	case <-reached:
	case <-wait.Done():
	}
	_, _, latest := recv.takeLatencies()
	rep.CeilingEvents = len(ids)
	rep.CeilingMissing = countMissing(recv, ids)
	if !latest.IsZero() {
		rep.CeilingSec = latest.Sub(start).Seconds()
		rep.CeilingEventsPerSec = float64(len(ids)-rep.CeilingMissing) / rep.CeilingSec
	}
	return h.Do(ctx, "DELETE", "/v1/subscriptions/"+subID, nil, nil)
}

// benchSubscription subscribes the receiver to message.status events and
// returns the subscription's id and its cursor (the feed's head when it
// was created).
func benchSubscription(ctx context.Context, h *Harness, recv *eventReceiver) (string, string, error) {
	var sub struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	if err := h.Do(ctx, "POST", "/v1/subscriptions", map[string]any{"url": recv.URL,
		"events": []string{string(wamux.EventMessageStatus)}}, &sub); err != nil {
		return "", "", err
	}
	if err := recv.setSecret(sub.Secret); err != nil {
		return "", "", err
	}
	s, err := h.App.Store().GetSubscription(ctx, sub.ID)
	if err != nil {
		return "", "", err
	}
	return sub.ID, s.Cursor, nil
}

// eventsHead is a cursor after the last event listed.
func eventsHead(ctx context.Context, st store.Store) (string, error) {
	cursor := ""
	for {
		es, next, err := st.ListEvents(ctx, cursor, 5000)
		if err != nil {
			return "", err
		}
		if len(es) == 0 {
			return cursor, nil
		}
		cursor = next
	}
}

// settledEventIDs are the webhook-ids of the message.status events after
// cursor once the feed lists no more for half a second, within timeout.
// The feed lists an event only when no event before it can still commit:
// on PostgreSQL, any transaction open on the server holds it back.
func settledEventIDs(ctx context.Context, st store.Store, cursor string, timeout time.Duration) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var ids []string
	for {
		more, err := statusEventIDs(ctx, st, cursor)
		if err != nil || (len(more) == len(ids) && len(ids) > 0) {
			return more, err
		}
		ids = more
		if !pause(ctx, 500*time.Millisecond) {
			return ids, nil
		}
	}
}

// statusEventIDs are the webhook-ids of the message.status events after
// cursor.
func statusEventIDs(ctx context.Context, st store.Store, cursor string) ([]string, error) {
	var ids []string
	for {
		es, next, err := st.ListEvents(ctx, cursor, 5000)
		if err != nil {
			return nil, fmt.Errorf("bench events: list events: %w", err)
		}
		if len(es) == 0 {
			return ids, nil
		}
		for _, e := range es {
			if e.Type == wamux.EventMessageStatus {
				ids = append(ids, events.WebhookID(e))
			}
		}
		cursor = next
	}
}

func countMissing(recv *eventReceiver, ids []string) int {
	n := 0
	for _, id := range ids {
		if !recv.has(id) {
			n++
		}
	}
	return n
}

// insertAccepted stores n messages of the benchmark's account as accepted
// by the provider, each with its own wamid, and returns the wamids; each
// insert writes an accepted message.status event.
func insertAccepted(ctx context.Context, st store.Store, prefix string, n int) ([]string, error) {
	wamids := make([]string, 0, n)
	const chunk = 500
	msgs := make([]wamux.Message, 0, chunk)
	for start := 0; start < n; start += chunk {
		msgs = msgs[:0]
		for i := start; i < min(start+chunk, n); i++ {
			id := prefix + "-" + strconv.Itoa(i)
			wamid := "wamid.bench-events-" + id
			msgs = append(msgs, wamux.Message{ID: "evt-bench-" + id, BizType: "bench", AccountID: benchEventsAccount,
				To: "4917" + fmt.Sprintf("%08d", i), Priority: wamux.DefaultPriority, Type: "text",
				Payload: []byte(`{"body":"bench"}`), ContentHash: id, Status: wamux.StatusAccepted, WAMID: wamid})
			wamids = append(wamids, wamid)
		}
		res, err := st.InsertMessages(ctx, msgs)
		if err != nil {
			return nil, fmt.Errorf("bench events: insert messages: %w", err)
		}
		for _, r := range res {
			if r.Outcome != store.Inserted {
				return nil, fmt.Errorf("bench events: insert messages: %s", r.Outcome)
			}
		}
	}
	return wamids, nil
}

// feedReceipts hands rs out in order, batch by batch, to concurrent
// callers.
func feedReceipts(ctx context.Context, rs []wamux.Receipt, batch, callers int, call func(context.Context, []wamux.Receipt) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(int64(batch))) - batch
				if i >= len(rs) || ctx.Err() != nil {
					return
				}
				if err := call(ctx, rs[i:min(i+batch, len(rs))]); err != nil {
					errs[c] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(append(errs, ctx.Err())...)
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// percentileOf is the q-quantile of xs (sorted in place).
func percentileOf(xs []float64, q float64) float64 {
	slices.Sort(xs)
	return percentile(xs, q)
}
