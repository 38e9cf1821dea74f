package sim

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wamux/wamux/provider/cloudapi"
)

// webhooker delivers status notifications like Meta does: after a delay,
// batched, signed, concurrently, and redelivered with exponential backoff
// until the receiver answers 200 or the attempts run out.
//
// One scheduler goroutine owns the timer heap and forms batches; workers
// POST them. Producers (the send path, and workers requeueing a failed
// POST) only append to an inbox under a mutex, so nothing ever blocks on
// the scheduler and the two sides cannot deadlock.
type webhooker struct {
	cfg    Webhooks
	log    *slog.Logger
	client *http.Client

	mu      sync.Mutex
	inbox   []item
	pending int // statuses held anywhere: inbox, heap, batches in flight
	seq     uint64
	clear   bool
	wake    chan struct{}

	out    chan *batch
	done   chan struct{}
	cancel context.CancelFunc
	ctx    context.Context
	wg     sync.WaitGroup

	posts, postFailures, delivered, dropped, gaveUp atomic.Int64
}

// item is a heap entry: a single status to batch, or a batch to resend.
// seq breaks ties between equal due times, so statuses planned for the
// same instant (zero delay) still leave in the order they were planned.
type item struct {
	due time.Time
	seq uint64
	st  *hookStatus
	b   *batch
}

// batch is one POST body; resent byte for byte, like Meta's retries.
type batch struct {
	body    []byte
	n       int
	attempt int
}

// WebhookStats is the webhook side of the ground truth.
type WebhookStats struct {
	// Posts answered 200 and the statuses they carried.
	Posts     int64 `json:"posts"`
	Delivered int64 `json:"statuses_delivered"`
	// PostFailures counts attempts not answered 200 (each retried).
	PostFailures int64 `json:"post_failures"`
	// Dropped statuses found the queue full; GaveUp ones ran out of
	// attempts. Pending are still queued or in flight.
	Dropped int64 `json:"statuses_dropped"`
	GaveUp  int64 `json:"statuses_gave_up"`
	Pending int64 `json:"statuses_pending"`
}

func newWebhooker(cfg Webhooks, log *slog.Logger) *webhooker {
	ctx, cancel := context.WithCancel(context.Background())
	h := &webhooker{
		cfg: cfg, log: log,
		client: &http.Client{
			Timeout: cfg.Timeout,
			Transport: &http.Transport{
				MaxIdleConnsPerHost: cfg.Concurrency,
				IdleConnTimeout:     90 * time.Second,
			},
		},
		wake: make(chan struct{}, 1),
		out:  make(chan *batch),
		done: make(chan struct{}),
		ctx:  ctx, cancel: cancel,
	}
	h.wg.Add(1 + cfg.Concurrency)
	go h.schedule()
	for range cfg.Concurrency {
		go h.work()
	}
	return h
}

// enqueue adds an accepted message's statuses, or drops them all when the
// queue is full (counted: a dropped status is a gap the gateway's
// compensation must cover).
func (h *webhooker) enqueue(plan []hookStatus) {
	h.mu.Lock()
	if h.pending+len(plan) > h.cfg.QueueSize {
		h.mu.Unlock()
		h.dropped.Add(int64(len(plan)))
		return
	}
	for i := range plan {
		h.seq++
		h.inbox = append(h.inbox, item{due: plan[i].due, seq: h.seq, st: &plan[i]})
	}
	h.pending += len(plan)
	h.mu.Unlock()
	h.poke()
}

func (h *webhooker) requeue(b *batch, due time.Time) {
	h.mu.Lock()
	h.seq++
	h.inbox = append(h.inbox, item{due: due, seq: h.seq, b: b})
	h.mu.Unlock()
	h.poke()
}

func (h *webhooker) finish(n int) {
	h.mu.Lock()
	h.pending -= n
	h.mu.Unlock()
}

func (h *webhooker) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// reset drops everything queued; batches already in flight complete.
func (h *webhooker) reset() {
	h.mu.Lock()
	h.clear = true
	h.mu.Unlock()
	h.poke()
	h.posts.Store(0)
	h.postFailures.Store(0)
	h.delivered.Store(0)
	h.dropped.Store(0)
	h.gaveUp.Store(0)
}

func (h *webhooker) stats() WebhookStats {
	h.mu.Lock()
	pending := h.pending
	h.mu.Unlock()
	return WebhookStats{
		Posts: h.posts.Load(), Delivered: h.delivered.Load(), PostFailures: h.postFailures.Load(),
		Dropped: h.dropped.Load(), GaveUp: h.gaveUp.Load(), Pending: int64(pending),
	}
}

func (h *webhooker) close() {
	close(h.done)
	h.cancel()
	h.wg.Wait()
	h.client.CloseIdleConnections()
}

func (h *webhooker) schedule() {
	defer h.wg.Done()
	var q itemHeap
	var open []*hookStatus // the batch being filled
	var openSince time.Time
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		h.mu.Lock()
		in := h.inbox
		h.inbox = nil
		if h.clear {
			h.clear = false
			held := len(open)
			for _, it := range q {
				held += it.size()
			}
			for _, it := range in {
				held += it.size()
			}
			h.pending -= held
			q, open, in = nil, nil, nil
		}
		h.mu.Unlock()
		for _, it := range in {
			heap.Push(&q, it)
		}

		now := time.Now()
		for len(q) > 0 && !q[0].due.After(now) {
			it := heap.Pop(&q).(item)
			if it.b != nil {
				if !h.send(it.b) {
					return
				}
				continue
			}
			if len(open) == 0 {
				openSince = now
			}
			open = append(open, it.st)
			if len(open) >= h.cfg.BatchSize {
				if !h.send(h.build(open)) {
					return
				}
				open = nil
			}
		}
		if len(open) > 0 && !now.Before(openSince.Add(h.cfg.BatchWait)) {
			if !h.send(h.build(open)) {
				return
			}
			open = nil
		}

		wait := time.Hour
		if len(q) > 0 {
			wait = q[0].due.Sub(now)
		}
		if len(open) > 0 {
			wait = min(wait, openSince.Add(h.cfg.BatchWait).Sub(now))
		}
		timer.Reset(max(wait, 0))
		select {
		case <-h.done:
			return
		case <-h.wake:
		case <-timer.C:
		}
	}
}

func (h *webhooker) send(b *batch) bool {
	select {
	case h.out <- b:
		return true
	case <-h.done:
		return false
	}
}

// build groups statuses by WABA (entry) and number (change), the shape
// Meta uses, so receivers must iterate every level.
func (h *webhooker) build(sts []*hookStatus) *batch {
	w := cloudapi.Webhook{Object: cloudapi.ObjectWhatsApp}
	entryOf := map[string]int{}
	changeOf := map[string][2]int{}
	for _, st := range sts {
		nb := st.number
		pos, ok := changeOf[nb.id]
		if !ok {
			e, ok := entryOf[nb.waba]
			if !ok {
				e = len(w.Entry)
				entryOf[nb.waba] = e
				w.Entry = append(w.Entry, cloudapi.Entry{ID: nb.waba})
			}
			w.Entry[e].Changes = append(w.Entry[e].Changes, cloudapi.Change{
				Field: "messages",
				Value: cloudapi.Value{
					MessagingProduct: "whatsapp",
					Metadata:         cloudapi.Metadata{DisplayPhoneNumber: nb.display, PhoneNumberID: nb.id},
				},
			})
			pos = [2]int{e, len(w.Entry[e].Changes) - 1}
			changeOf[nb.id] = pos
		}
		v := &w.Entry[pos[0]].Changes[pos[1]].Value
		v.Statuses = append(v.Statuses, st.status)
	}
	body, err := json.Marshal(w)
	if err != nil {
		// Our own types always marshal; keep the count right regardless.
		h.log.Error("sim: marshal webhook", "err", err)
	}
	return &batch{body: body, n: len(sts)}
}

func (h *webhooker) work() {
	defer h.wg.Done()
	for {
		select {
		case <-h.done:
			return
		case b := <-h.out:
			h.deliver(b)
		}
	}
}

// deliver makes one POST attempt and decides what happens to the batch.
func (h *webhooker) deliver(b *batch) {
	b.attempt++
	ok := h.post(b.body)
	switch {
	case ok:
		h.posts.Add(1)
		h.delivered.Add(int64(b.n))
		h.finish(b.n)
	case h.ctx.Err() != nil:
		h.finish(b.n)
	case b.attempt >= h.cfg.MaxAttempts:
		h.postFailures.Add(1)
		h.gaveUp.Add(int64(b.n))
		h.finish(b.n)
		h.log.Warn("sim: webhook given up", "attempts", b.attempt, "statuses", b.n)
	default:
		h.postFailures.Add(1)
		h.requeue(b, time.Now().Add(h.backoff(b.attempt)))
	}
}

// backoff doubles from RetryBase up to RetryMax: Meta retries "with
// decreasing frequency".
func (h *webhooker) backoff(attempt int) time.Duration {
	d := h.cfg.RetryBase
	for i := 1; i < attempt && d < h.cfg.RetryMax; i++ {
		d *= 2
	}
	return min(d, h.cfg.RetryMax)
}

// post reports whether the receiver answered exactly 200, the only answer
// Meta treats as delivered.
func (h *webhooker) post(body []byte) bool {
	req, err := http.NewRequestWithContext(h.ctx, http.MethodPost, h.cfg.URL, bytes.NewReader(body))
	if err != nil {
		h.log.Error("sim: webhook request", "err", err)
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "facebookexternalua")
	if h.cfg.AppSecret != "" {
		req.Header.Set(cloudapi.SignatureHeader, cloudapi.Sign(body, h.cfg.AppSecret))
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.log.Debug("sim: webhook post failed", "err", err)
		return false
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (it item) size() int {
	if it.b != nil {
		return it.b.n
	}
	return 1
}

// itemHeap orders items by due time.
type itemHeap []item

func (q itemHeap) Len() int { return len(q) }
func (q itemHeap) Less(i, j int) bool {
	if !q[i].due.Equal(q[j].due) {
		return q[i].due.Before(q[j].due)
	}
	return q[i].seq < q[j].seq
}
func (q itemHeap) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *itemHeap) Push(x any)   { *q = append(*q, x.(item)) }
func (q *itemHeap) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}
