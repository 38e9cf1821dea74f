package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/wamux/wamux"
)

// DemoEvents is what the demo's event receiver got, checked against the
// gateway's final status of every message the demo submitted and the
// simulator's list of accepted messages.
type DemoEvents struct {
	// Received counts deliveries answered 2xx, repeats included; Distinct
	// the webhook-ids among them; Duplicates the repeats.
	Received   int64            `json:"received"`
	Distinct   int64            `json:"distinct"`
	Duplicates int64            `json:"duplicates"`
	ByType     map[string]int64 `json:"by_type"`
	// Missing counts messages whose final status is not the status of
	// the last message.status event received for them.
	Missing int `json:"missing"`
	// OutOfOrder counts message.status events of a version lower than one
	// already received for the same message.
	OutOfOrder    int64 `json:"out_of_order"`
	BadSignatures int64 `json:"bad_signatures"`
	// Checked counts the messages compared; InFlight those left out because
	// their status is a step inside the gateway (queued, waiting_seq,
	// sending), which makes no event.
	Checked  int `json:"checked"`
	InFlight int `json:"in_flight"`
	// Settled: the subscription's pending deliveries reached 0 before the
	// check.
	Settled bool `json:"settled"`
}

// demoSubscription subscribes the receiver to every event through the API.
func demoSubscription(ctx context.Context, h *Harness, r *eventReceiver) (string, error) {
	var sub struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	if err := h.Do(ctx, "POST", "/v1/subscriptions", map[string]any{"url": r.URL, "events": []string{"*"},
		"description": "wamux demo receiver"}, &sub); err != nil {
		return "", fmt.Errorf("subscribe the demo's receiver: %w", err)
	}
	if err := r.setSecret(sub.Secret); err != nil {
		return "", err
	}
	return sub.ID, nil
}

// reported are the statuses a message.status event reports.
var reported = []string{"accepted", "sent", "delivered", "read", "failed", "dropped", "held", "unknown"}

// checkDemoEvents waits for the subscription's pending deliveries to
// reach 0, then compares every message's status (GET /v1/messages/{id})
// with the last status event received for it. The messages that differ
// are read again after the next settle, for as long as events keep
// arriving: a message whose status moved on since it was read gets its
// event. It stops when a pass and the second after it bring no new event,
// when delivery makes no progress for 15 s, or after 3 min.
func checkDemoEvents(ctx context.Context, h *Harness, subID string, r *eventReceiver, ids []string) DemoEvents {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var out DemoEvents
	todo, first := ids, true
	for len(todo) > 0 {
		before := r.counts().distinct
		out.Settled = waitSettled(ctx, h, subID, r)
		statuses := messageStatuses(ctx, h, todo)
		var again []string
		for i, id := range todo {
			st := statuses[i]
			if st == "" {
				again = append(again, id)
				continue
			}
			if !slices.Contains(reported, st) {
				if first {
					out.InFlight++
				}
				continue
			}
			if first {
				out.Checked++
			}
			if got, _ := r.lastStatus(id); got != st {
				again = append(again, id)
			}
		}
		todo, first = again, false
		if len(todo) == 0 || !out.Settled || !pause(ctx, time.Second) || r.counts().distinct == before {
			break
		}
	}
	out.Missing = len(todo)
	c := r.counts()
	out.Received, out.Distinct, out.Duplicates, out.ByType = c.received, c.distinct, c.duplicates, c.byType
	out.OutOfOrder, out.BadSignatures = c.outOfOrder, c.badSignatures
	return out
}

// waitSettled polls the subscription until nothing is pending; false when
// ctx ends or no new event reaches the receiver for 15 s.
func waitSettled(ctx context.Context, h *Harness, subID string, r *eventReceiver) bool {
	const stall = 15 * time.Second
	seen, progress := r.counts().distinct, time.Now()
	for {
		var sub struct {
			Pending *int `json:"pending"`
		}
		if err := h.Do(ctx, "GET", "/v1/subscriptions/"+subID, nil, &sub); err == nil && sub.Pending != nil && *sub.Pending == 0 {
			return true
		}
		if n := r.counts().distinct; n != seen {
			seen, progress = n, time.Now()
		}
		if time.Since(progress) > stall || !pause(ctx, 100*time.Millisecond) {
			return false
		}
	}
}

// pause waits d; false when ctx ended first.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// messageStatuses reads each message's status through the API, eight at a
// time; "" when it could not be read.
func messageStatuses(ctx context.Context, h *Harness, ids []string) []string {
	out := make([]string, len(ids))
	next := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				var m struct {
					Status wamux.Status `json:"status"`
				}
				if err := h.Do(ctx, "GET", "/v1/messages/"+ids[i], nil, &m); err == nil {
					out[i] = string(m.Status)
				}
			}
		}()
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}
