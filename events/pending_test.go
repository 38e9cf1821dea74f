package events_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/store"
)

// countingStore is the real store, counting the due-list reads.
type countingStore struct {
	store.Store
	dueReads atomic.Int64
}

func (c *countingStore) DueDeliveries(ctx context.Context, subID string, now time.Time, limit int) ([]store.Delivery, error) {
	c.dueReads.Add(1)
	return c.Store.DueDeliveries(ctx, subID, now, limit)
}

// TestDueListHeldInMemory: once the store holds no pending delivery of a
// subscription, the deliverer keeps what it enqueues in memory and picks
// due deliveries there: 120 events, a third of them retried once, reach
// the receiver in version order per message while the store's due list
// is read only until the deliverer found it empty.
func TestDueListHeldInMemory(t *testing.T) {
	raw := openStore(t, t.TempDir())
	defer raw.Close()
	st := &countingStore{Store: raw}
	r := newReceiver(t, func(n int) int {
		if n%3 == 0 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	m := startManager(t, st, managerOpts{})
	defer m.Stop()
	sub := subscribe(t, m, r, wamux.EventMessageStatus)
	// The deliverer finds nothing pending at its first look.
	testwait.For(t, "the deliverer's first look at the due list", 10*time.Second, func() bool { return st.dueReads.Load() > 0 })
	readsBefore := st.dueReads.Load()

	var ids []string
	for i := range 30 {
		ids = append(ids, fmt.Sprintf("m%02d", i))
	}
	addMessages(t, st, ids...)
	for _, s := range lifecycle {
		for _, id := range ids {
			progress(t, st, id, s)
		}
	}
	want := len(ids) * len(lifecycle)
	ds := r.waitFor("every event delivered", func(ds []delivery) bool { return len(accepted(ds)) == want })
	last := map[string]float64{}
	for _, d := range ds {
		if d.status != http.StatusNoContent {
			continue
		}
		msg, v := d.data["msg_id"].(string), d.data["version"].(float64)
		if v <= last[msg] {
			t.Fatalf("message %s: version %v delivered after %v", msg, v, last[msg])
		}
		last[msg] = v
	}
	if got := st.dueReads.Load() - readsBefore; got > 2 {
		t.Fatalf("the due list was read %d times from the store while %d events were delivered from memory", got, want)
	}
	testwait.For(t, "every delivery settled in the store", 10*time.Second, func() bool {
		n, _, err := raw.DeliveryBacklog(t.Context(), sub.ID)
		return err == nil && n == 0
	})
}
