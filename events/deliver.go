package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/webhooksig"
)

// outcome is what one delivery attempt came to.
type outcome struct {
	d       store.Delivery
	status  int // HTTP status; 0 when no answer
	err     string
	at      time.Time
	latency time.Duration
}

// deliverer delivers one subscription's events (see the package comment).
type deliverer struct {
	m      *Manager
	sub    wamux.Subscription
	key    []byte // the secret
	oldKey []byte // the previous secret, until sub.OldSecretUntil
	cursor string
	cancel context.CancelFunc
	done   chan struct{}

	inflight map[int64]bool
	keys     map[string]bool
	results  chan outcome
	wg       sync.WaitGroup

	// mem holds the pending deliveries while it has them all, so that
	// the due list is not read from the store on every dispatch.
	mem pending
	// page holds due deliveries read from the store not dispatched yet,
	// while mem does not hold them all.
	page []store.Delivery

	settleDone  []int64
	doneKeys    []string // the order keys of settleDone
	settleRetry []store.Delivery
	// stop, when set, is the state the subscription moves to once what is
	// settled is written: disabled (410) or failing (retry window spent).
	stop       wamux.SubscriptionState
	stopReason string
}

func (d *deliverer) run(ctx context.Context) {
	defer close(d.done)
	defer d.keepDelivered(ctx)
	defer d.wg.Wait()
	d.inflight, d.keys = map[int64]bool{}, map[string]bool{}
	d.results = make(chan outcome, d.m.cfg.Concurrency)
	idle := time.NewTimer(0)
	defer idle.Stop()
	// Outcomes are settled, and free slots filled, in groups of batch (or
	// when nothing else is in flight, the feed moved or the idle poll
	// came): one transaction and one due-list query serve several
	// deliveries.
	batch := max(1, d.m.cfg.Concurrency/4)
	feed, due := true, true
	for {
		outcomes := len(d.settleDone) + len(d.settleRetry)
		if due || outcomes >= batch || len(d.inflight) == outcomes {
			if !d.settle(ctx) {
				if !d.sleep(ctx, time.Second) {
					return
				}
				continue
			}
			if d.stop != "" {
				d.m.stopped(ctx, d)
				return
			}
			if feed {
				if err := d.fanOut(ctx); err != nil && ctx.Err() == nil {
					d.m.log.Warn("events: queue deliveries", "subscription", d.sub.ID, "err", err)
				} else {
					feed = false
				}
			}
			if err := d.dispatch(ctx); err != nil && ctx.Err() == nil {
				d.m.log.Warn("events: read due deliveries", "subscription", d.sub.ID, "err", err)
			}
			due = false
		}
		idle.Reset(d.m.cfg.IdlePoll)
		select {
		case <-ctx.Done():
			return
		case o := <-d.results:
			d.handle(o)
			d.drain()
		case <-d.m.watch.changed():
			feed, due = true, true
		case <-idle.C:
			feed, due = true, true
		}
	}
}

func (d *deliverer) sleep(ctx context.Context, dur time.Duration) bool {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case o := <-d.results:
		d.handle(o)
		return true
	case <-t.C:
		return true
	}
}

// keepDelivered runs as the deliverer stops: it stores the deliveries
// already answered 2xx, so that a restart (a change of the subscription, a
// rotation, the next start of the gateway) does not send them again.
// Failed and cancelled attempts are left pending as they were.
func (d *deliverer) keepDelivered(ctx context.Context) {
	for more := true; more; {
		select {
		case o := <-d.results:
			if o.err == "" {
				d.handle(o)
			}
		default:
			more = false
		}
	}
	if len(d.settleDone) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopSettleTimeout)
	defer cancel()
	if err := d.m.st.SettleDeliveries(ctx, d.sub.ID, d.settleDone, nil); err != nil {
		d.m.log.Warn("events: settle deliveries at stop; they are sent again", "subscription", d.sub.ID,
			"deliveries", len(d.settleDone), "err", err)
	}
}

// stopSettleTimeout bounds the store write of keepDelivered.
const stopSettleTimeout = 5 * time.Second

// drain takes every outcome already there.
func (d *deliverer) drain() {
	for {
		select {
		case o := <-d.results:
			d.handle(o)
		default:
			return
		}
	}
}

// settle writes the outcomes gathered; a delivery leaves the in-flight set
// only once its outcome is stored, so it is never attempted twice at once.
func (d *deliverer) settle(ctx context.Context) bool {
	if len(d.settleDone) == 0 && len(d.settleRetry) == 0 {
		return true
	}
	if err := d.m.st.SettleDeliveries(ctx, d.sub.ID, d.settleDone, d.settleRetry); err != nil {
		if ctx.Err() == nil {
			d.m.log.Warn("events: settle deliveries", "subscription", d.sub.ID, "err", err)
		}
		return false
	}
	d.mem.settled(d.settleDone, d.settleRetry)
	for i, id := range d.settleDone {
		delete(d.inflight, id)
		delete(d.keys, d.doneKeys[i])
	}
	for _, r := range d.settleRetry {
		delete(d.inflight, r.EventID)
		delete(d.keys, r.OrderKey)
	}
	d.settleDone, d.doneKeys, d.settleRetry = d.settleDone[:0], d.doneKeys[:0], d.settleRetry[:0]
	return true
}

// fanOut moves the matching events past the cursor into pending deliveries.
func (d *deliverer) fanOut(ctx context.Context) error {
	const page = 500
	for {
		es, next, err := d.m.st.ListEvents(ctx, d.cursor, page)
		if err != nil || len(es) == 0 {
			return err
		}
		now := d.m.cfg.Now()
		var ds []store.Delivery
		for _, e := range es {
			if d.sub.Matches(e.Type, e.AccountID) {
				ds = append(ds, store.Delivery{EventID: e.ID, OrderKey: store.OrderKey(e), NextAt: now, Event: e})
			}
		}
		moved, err := d.m.st.EnqueueDeliveries(ctx, d.sub.ID, d.cursor, next, ds)
		if err != nil {
			// It may have committed: what is held may miss some.
			d.mem.reset()
			return err
		}
		if moved {
			d.mem.add(ds)
		} else {
			// Deliveries enqueued apart from this loop (a replay) are
			// only in the store.
			d.mem.reset()
			// A replay moved the cursor; continue from where it is.
			sub, err := d.m.st.GetSubscription(ctx, d.sub.ID)
			if err != nil {
				return err
			}
			d.cursor = sub.Cursor
			continue
		}
		d.cursor = next
		if len(es) < page {
			return nil
		}
	}
}

// dispatch starts the due deliveries there is room for.
func (d *deliverer) dispatch(ctx context.Context) error {
	free := d.m.cfg.Concurrency - len(d.inflight)
	if free <= 0 {
		return nil
	}
	taken := func(dl store.Delivery) bool { return d.inflight[dl.EventID] || d.keys[dl.OrderKey] }
	var due []store.Delivery
	if d.mem.complete {
		due = d.mem.due(d.m.cfg.Now(), free, taken)
	} else {
		if len(d.page) == 0 {
			page, err := d.m.st.DueDeliveries(ctx, d.sub.ID, d.m.cfg.Now(), duePage+len(d.inflight))
			if err != nil {
				return err
			}
			for _, dl := range page {
				if !taken(dl) {
					d.page = append(d.page, dl)
				}
			}
		}
		due = d.page
		if len(due) == 0 && len(d.inflight) == 0 {
			// Nothing due, nothing in flight: if nothing is pending
			// either, what fanOut enqueues from now on is all there is.
			n, _, err := d.m.st.DeliveryBacklog(ctx, d.sub.ID)
			if err != nil {
				return err
			}
			if n == 0 {
				d.mem.start()
			}
		}
	}
	used := 0
	for _, dl := range due {
		if free == 0 {
			break
		}
		used++
		if taken(dl) {
			continue
		}
		d.inflight[dl.EventID], d.keys[dl.OrderKey] = true, true
		free--
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			// Never blocks: results holds one outcome per delivery in
			// flight, and a delivery leaves the in-flight set only once its
			// outcome is handled.
			d.results <- d.attempt(ctx, dl)
		}()
	}
	if !d.mem.complete {
		clear(d.page[:used])
		d.page = d.page[used:]
	}
	return nil
}

// duePage is how many due deliveries one read of the store's due list
// takes while the pending ones are not all held in memory: the rows read
// stay due and first of their order keys until dispatched (only this
// deliverer settles them), so a backlog is read once per page, not once
// per dispatch.
const duePage = 512

// attempt posts one event to the endpoint.
func (d *deliverer) attempt(ctx context.Context, dl store.Delivery) outcome {
	o := outcome{d: dl}
	body, err := Body(dl.Event)
	if err != nil {
		o.err = "encode event: " + err.Error()
		o.at = d.m.cfg.Now()
		return o
	}
	ts := d.m.cfg.Now()
	keys := [][]byte{d.key}
	if d.oldKey != nil && ts.Before(d.sub.OldSecretUntil) {
		keys = append(keys, d.oldKey)
	}
	id := WebhookID(dl.Event)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.sub.URL, bytes.NewReader(body))
	if err != nil {
		o.err, o.at = "build request: "+err.Error(), d.m.cfg.Now()
		return o
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "wamux-events")
	req.Header.Set(webhooksig.HeaderID, id)
	req.Header.Set(webhooksig.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(webhooksig.HeaderSignature, webhooksig.SignatureHeader(keys, id, ts, body))
	start := time.Now()
	resp, err := d.m.client.Do(req)
	o.latency, o.at = time.Since(start), d.m.cfg.Now()
	if err != nil {
		o.err = describe(err)
		return o
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	o.status = resp.StatusCode
	if o.status < 200 || o.status > 299 {
		o.err = "HTTP " + strconv.Itoa(o.status)
	}
	return o
}

// describe is a delivery error as an operator reads it: a refused
// destination says why, anything else what failed.
func describe(err error) string {
	var we *wamux.Error
	if errors.As(err, &we) {
		return we.Message
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return err.Error()
}

// handle files one outcome for the next settle.
func (d *deliverer) handle(o outcome) {
	m, sub := d.m.metrics, d.sub.ID
	d.m.record(sub, o)
	switch {
	case o.err == "":
		m.attempts.WithLabelValues(sub, "delivered").Inc()
		m.delivered.WithLabelValues(sub).Inc()
		m.latency.WithLabelValues(sub).Observe(o.at.Sub(o.d.Event.CreatedAt).Seconds())
		d.settleDone = append(d.settleDone, o.d.EventID)
		d.doneKeys = append(d.doneKeys, o.d.OrderKey)
		return
	case o.status == http.StatusGone:
		m.attempts.WithLabelValues(sub, "gone").Inc()
		d.stop, d.stopReason = wamux.SubscriptionDisabled, "the endpoint answered 410 Gone"
	}
	r := o.d
	r.Attempts++
	r.LastError = o.err
	if r.FirstFailedAt.IsZero() {
		r.FirstFailedAt = o.at
	}
	r.NextAt = o.at.Add(backoff(d.m.cfg.BackoffBase, d.m.cfg.BackoffCap, r.Attempts))
	window := d.m.cfg.Settings().EventRetryWindow
	if d.stop == "" && o.at.Sub(r.FirstFailedAt) >= window {
		m.attempts.WithLabelValues(sub, "failed").Inc()
		d.stop = wamux.SubscriptionFailing
		d.stopReason = fmt.Sprintf("event %s undelivered for %s: %s", WebhookID(o.d.Event), window, o.err)
	} else if d.stop == "" {
		m.attempts.WithLabelValues(sub, "retry").Inc()
	}
	d.settleRetry = append(d.settleRetry, r)
}

// backoff is the wait before attempt n+1: exponential from base, capped,
// with full jitter.
func backoff(base, cap time.Duration, n int) time.Duration {
	d := cap
	if n < 40 {
		d = min(cap, base<<(n-1))
	}
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(d))) + 1
}
