package events

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// watcher follows the head of the feed and wakes everyone waiting for new
// events (deliverers, long polls). Events are written by the store's
// triggers, so nothing announces them; one poll serves every waiter.
type watcher struct {
	st      store.EventStore
	every   time.Duration
	metrics *metrics
	log     *slog.Logger

	mu     sync.Mutex
	wake   chan struct{} // closed when events were seen, then replaced
	cursor string
	recent []wamux.Event // the latest events seen, oldest first
}

// recentEvents is how many of the latest events the watcher keeps for the
// dashboard.
const recentEvents = 50

func newWatcher(st store.EventStore, every time.Duration, m *metrics, log *slog.Logger) *watcher {
	return &watcher{st: st, every: every, metrics: m, log: log, wake: make(chan struct{})}
}

// changed returns a channel closed when events newer than now are seen.
func (w *watcher) changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wake
}

// poke wakes every waiter now (a subscription changed, a test).
func (w *watcher) poke() {
	w.mu.Lock()
	close(w.wake)
	w.wake = make(chan struct{})
	w.mu.Unlock()
}

func (w *watcher) run(ctx context.Context) {
	c, err := w.st.EventCursorAt(ctx, time.Now().Add(24*time.Hour))
	for err != nil {
		w.log.Warn("events: read the feed head", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		c, err = w.st.EventCursorAt(ctx, time.Now().Add(24*time.Hour))
	}
	w.cursor = c
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if w.poll(ctx) {
			w.poke()
		}
	}
}

// poll reads past the cursor and reports whether there was anything.
func (w *watcher) poll(ctx context.Context) bool {
	seen := false
	for {
		es, next, err := w.st.ListEvents(ctx, w.cursor, 512)
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn("events: follow the feed", "err", err)
			}
			return seen
		}
		if len(es) == 0 {
			return seen
		}
		for _, e := range es {
			w.metrics.written.WithLabelValues(string(e.Type)).Inc()
		}
		w.mu.Lock()
		w.recent = append(w.recent, es[max(0, len(es)-recentEvents):]...)
		w.recent = w.recent[max(0, len(w.recent)-recentEvents):]
		w.mu.Unlock()
		w.cursor, seen = next, true
		if len(es) < 512 {
			return seen
		}
	}
}

// latest returns the latest events seen, newest first.
func (w *watcher) latest() []wamux.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]wamux.Event, 0, len(w.recent))
	for i := len(w.recent) - 1; i >= 0; i-- {
		out = append(out, w.recent[i])
	}
	return out
}
