package sim

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
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

// batch is one POST body; resent byte for byte, like Meta's retries.
type batch struct {
	body    []byte
	n       int
	attempt int
	first   time.Time // first attempt, for RetryFor
}

// WebhookStats is the webhook side of the ground truth.
type WebhookStats struct {
	// Posts answered 200 and the statuses (and inbound messages) they
	// carried; the other counts take inbound messages as statuses too.
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
			// Meta retries any answer but 200 (reference §6), a redirect
			// included: following it would count a misrouted receiver as
			// delivered and post the signed body to another URL.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
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
