package receipts_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/store"
)

// TestDuplicateKeyAfterBloomForgets: L3 is unique on (message, account,
// type), so a second receipt with the same key but another event_time or
// error code is a duplicate and must not change the state. The Bloom
// filter forgets across restarts (and after 48 h); the repeat then reaches
// Merge beside L3, and it used to take the state while the store kept the
// first receipt: state and stored receipt disagreed.
func TestDuplicateKeyAfterBloomForgets(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			ctx := context.Background()
			first := rcpt("acc1", "w1", wamux.ReceiptFailed, 10)
			first.ErrorCode = 131000 // transient: message stays accepted
			p1 := startPipeline(t, receipts.Config{Store: st})
			ingest(t, p1, first)
			flush(t, p1)
			if err := p1.Stop(ctx); err != nil {
				t.Fatal(err)
			}

			// Same key (w1, acc1, failed), later event and another code,
			// after a restart: L1 and L2 are empty, L3 knows the key.
			again := rcpt("acc1", "w1", wamux.ReceiptFailed, 20)
			again.ErrorCode = 131026
			p2 := startPipeline(t, receipts.Config{Store: st})
			ingest(t, p2, again)
			flush(t, p2)
			if s := p2.Stats(); s.DedupStore != 1 {
				t.Fatalf("stats %+v: want the repeat found stored by L3", s)
			}
			stored, err := st.ListReceipts(ctx, "acc1", "w1")
			if err != nil {
				t.Fatal(err)
			}
			if len(stored) != 1 || stored[0].ErrorCode != first.ErrorCode || !stored[0].EventTime.Equal(first.EventTime) {
				t.Fatalf("stored receipts = %+v, want the first failed only", stored)
			}
			// The state must be the one the stored receipts make.
			checkStates(t, st, map[store.StateKey]wamux.Receipt{{AccountID: "acc1", MessageID: "w1"}: first})
		})
	}
}

// TestLateWindowUsesArrivalNotProcessing: a receipt that arrived one
// minute after the state it changes, inside the 5 min window, but was
// processed later because apply_state was off ("apply state later"), is
// applied: the window runs to its arrival, not to its processing.
func TestLateWindowUsesArrivalNotProcessing(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	clock := fakeclock.NewAt(base)
	set, err := settings.Load(ctx, st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	p := startPipeline(t, receipts.Config{Store: st, Now: clock.Now, Settings: set})
	ingest(t, p, rcpt("acc1", "w1", wamux.ReceiptSent, 100))
	flush(t, p)
	if _, err := set.Update(ctx, map[string]string{"apply_state": "false"}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute) // arrives inside the window
	ingest(t, p, rcpt("acc1", "w1", wamux.ReceiptDelivered, 50))
	clock.Advance(10 * time.Minute) // merged once the operator switches back
	if _, err := set.Update(ctx, map[string]string{"apply_state": "true"}); err != nil {
		t.Fatal(err)
	}
	flush(t, p)
	audit, err := st.ListLateReceipts(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 0 {
		t.Fatalf("audit = %+v: a receipt that arrived 1 min after the state was judged late", audit)
	}
	checkStates(t, st, map[store.StateKey]wamux.Receipt{{AccountID: "acc1", MessageID: "w1"}: rcpt("acc1", "w1", wamux.ReceiptDelivered, 50)})
}

// flakyFind fails FindMessages with an infrastructure error a number of
// times: the states are stored by then, the message update is not.
type flakyFind struct {
	store.Store
	failures atomic.Int32
}

func (f *flakyFind) FindMessages(ctx context.Context, wamids, callbacks []string) ([]wamux.Message, error) {
	if f.failures.Add(-1) >= 0 {
		return nil, errors.New("database is locked")
	}
	return f.Store.FindMessages(ctx, wamids, callbacks)
}

// TestResolutionRetriedAfterFailure: the message lookup that follows the
// state write fails beyond the bounded retry; the batch goes back to the
// log and is merged again. The state already holds the receipt, so the
// merge calls it Ignore, and the message must be resolved all the same.
func TestResolutionRetriedAfterFailure(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			ctx := context.Background()
			m := wamux.Message{ID: "m1", BizType: "otp", AccountID: "acc1", To: "+491", Type: "text",
				Payload: []byte(`{"body":"x"}`), ContentHash: "m1", Status: wamux.StatusQueued}
			if _, err := st.InsertMessages(ctx, []wamux.Message{m}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.UpdateMessage(ctx, store.MessageUpdate{MsgID: "m1", Status: wamux.StatusAccepted, WAMID: "w1"}); err != nil {
				t.Fatal(err)
			}
			f := &flakyFind{Store: st}
			f.failures.Store(2) // as many as Attempts: the batch fails once
			p := startPipeline(t, receipts.Config{Store: f, Retry: receipts.RetryConfig{Attempts: 2, Base: time.Millisecond, Max: 5 * time.Millisecond}})
			ingest(t, p, rcpt("acc1", "w1", wamux.ReceiptDelivered, 1))
			flush(t, p)
			if f.failures.Load() > 0 {
				t.Fatalf("failure path not taken (failures left %d)", f.failures.Load())
			}
			got, err := st.GetMessage(ctx, "m1")
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != wamux.StatusDelivered {
				t.Fatalf("message status = %s, want delivered: the status is in the state but never reached the message (stats %+v)",
					got.Status, p.Stats())
			}
		})
	}
}

// TestLateRepeatAfterBloomForgetsStaysOut: a receipt audited as late is
// stored (L3), so a redelivery of it is a duplicate whatever the Bloom
// filter remembers. After a restart (or 48 h) the filter has forgotten
// it, and the redelivery reached Merge beside L3: judged against a state
// applied since, within the window, it took the state — a receipt the
// audit table says left the state alone, changing it on its second
// arrival. With the filter warm the same redelivery is dropped.
func TestLateRepeatAfterBloomForgetsStaysOut(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			ctx := context.Background()
			clock := fakeclock.NewAt(base)
			key := store.StateKey{AccountID: "acc1", MessageID: "w1"}
			delivered := rcpt("acc1", "w1", wamux.ReceiptDelivered, 50)
			failed := rcpt("acc1", "w1", wamux.ReceiptFailed, 200)
			failed.ErrorCode = 131026

			p1 := startPipeline(t, receipts.Config{Store: st, Now: clock.Now})
			ingest(t, p1, rcpt("acc1", "w1", wamux.ReceiptSent, 100))
			flush(t, p1)
			clock.Advance(10 * time.Minute) // past the 5 min window: late
			ingest(t, p1, delivered)
			flush(t, p1)
			clock.Advance(10 * time.Minute)
			ingest(t, p1, failed) // in order: applies, a new state
			flush(t, p1)
			if s := p1.Stats(); s.Late != 1 || s.Applied != 2 {
				t.Fatalf("stats %+v: want sent and failed applied, delivered late", s)
			}
			if err := p1.Stop(ctx); err != nil {
				t.Fatal(err)
			}

			// A redelivery of the late delivered, one minute after the
			// failed state was applied, by a restarted pipeline.
			clock.Advance(time.Minute)
			p2 := startPipeline(t, receipts.Config{Store: st, Now: clock.Now})
			ingest(t, p2, delivered)
			flush(t, p2)
			if s := p2.Stats(); s.DedupStore != 1 || s.Applied != 0 {
				t.Fatalf("stats %+v: want the redelivery found stored by L3 and nothing applied", s)
			}
			checkStates(t, st, map[store.StateKey]wamux.Receipt{key: failed})
			audit, err := st.ListLateReceipts(ctx, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(audit) != 1 {
				t.Fatalf("audit = %+v, want the one late delivered", audit)
			}
		})
	}
}
