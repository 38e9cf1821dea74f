package events_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// flakySettle fails every SettleDeliveries while failing is set, and says
// so on failed.
type flakySettle struct {
	store.Store
	failing atomic.Bool
	failed  chan struct{}
}

func (f *flakySettle) SettleDeliveries(ctx context.Context, sub string, done []int64, retry []store.Delivery) error {
	if f.failing.Load() {
		select {
		case f.failed <- struct{}{}:
		default:
		}
		return errors.New("settle refused by the test")
	}
	return f.Store.SettleDeliveries(ctx, sub, done, retry)
}

// A delivery answered 2xx whose outcome is not yet stored when the
// deliverer stops is stored as it stops, not sent again after a restart.
func TestStopKeepsWhatWasDelivered(t *testing.T) {
	base := openStore(t, t.TempDir())
	defer base.Close()
	st := &flakySettle{Store: base, failed: make(chan struct{}, 1)}
	st.failing.Store(true)
	r := newReceiver(t, func(int) int { return http.StatusNoContent })
	m := startManager(t, st, managerOpts{})
	defer m.Stop()
	s := subscribe(t, m, r)
	addMessages(t, base, "m1")
	progress(t, base, "m1", wamux.StatusAccepted)
	r.waitFor("the delivery", func(ds []delivery) bool { return len(ds) == 1 })
	// The outcome is handled: the deliverer tried to store it and now
	// waits to try again.
	<-st.failed
	st.failing.Store(false)
	m.Stop()

	n, _, err := base.DeliveryBacklog(context.Background(), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d deliveries pending after a stop, want the delivered one stored as done", n)
	}
	m2 := startManager(t, base, managerOpts{})
	defer m2.Stop()
	progress(t, base, "m1", wamux.StatusSent)
	ds := r.waitFor("the next event", func(ds []delivery) bool { return len(ds) >= 2 })
	if len(ds) != 2 || ds[1].data["status"] != "sent" {
		t.Fatalf("after the restart: %d requests, the second %s", len(ds), ds[1].body)
	}
}
