package receipts_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/sqlite"
)

// TestTinyBloomLosesNothing saturates a tiny Bloom filter so that most
// new receipts are false positives: each must be confirmed against the
// real store and kept, so nothing is lost and the states are right.
func TestTinyBloomLosesNothing(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			p := startPipeline(t, receipts.Config{
				Store: st,
				Bloom: receipts.BloomConfig{ExpectedPerHour: 1, FalsePositiveRate: 0.5},
				LRU:   receipts.LRUConfig{PerAccount: 1}, // let repeats reach L2 and L3
			})
			var uniq []wamux.Receipt
			for i := range 800 {
				for _, typ := range []wamux.ReceiptType{wamux.ReceiptSent, wamux.ReceiptDelivered} {
					uniq = append(uniq, rcpt("acc1", fmt.Sprintf("wamid.%d", i), typ, i))
				}
			}
			for start := 0; start < len(uniq); start += 100 {
				chunk := uniq[start:min(start+100, len(uniq))]
				ingest(t, p, chunk...)
				ingest(t, p, chunk[:10]...) // repeats
			}
			flush(t, p)
			s := p.Stats()
			if s.BloomFalsePositives < int64(len(uniq))/2 {
				t.Fatalf("false positives = %d of %d new receipts; the filter is not saturated, the test proves nothing",
					s.BloomFalsePositives, len(uniq))
			}
			checkStored(t, st, uniq)
			checkStates(t, st, expected(uniq))
			if s.Applied != int64(len(uniq)) {
				t.Fatalf("applied %d, want %d (each new receipt once)", s.Applied, len(uniq))
			}
		})
	}
}

// TestRecoversAfterCrash: receipts durable in the log but never processed
// (the process died after the 200), some already stored by L3 before the
// crash, are merged at the next Start.
func TestRecoversAfterCrash(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			ctx := context.Background()
			rs := []wamux.Receipt{
				rcpt("acc1", "w1", wamux.ReceiptSent, 1), rcpt("acc1", "w1", wamux.ReceiptDelivered, 2),
				rcpt("acc2", "w2", wamux.ReceiptRead, 3), rcpt("acc2", "w3", wamux.ReceiptSent, 4),
			}
			if _, err := st.AppendReceiptLog(ctx, rs); err != nil {
				t.Fatal(err)
			}
			// The crash came after L3 stored these, before the merge.
			if _, err := st.InsertReceipts(ctx, rs[1:3]); err != nil {
				t.Fatal(err)
			}
			p := startPipeline(t, receipts.Config{Store: st})
			checkStates(t, st, expected(rs))
			left, err := st.ListReceiptLog(ctx, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != 0 {
				t.Fatalf("log still holds %d entries after recovery", len(left))
			}
			ingest(t, p, rcpt("acc1", "w1", wamux.ReceiptRead, 5))
			flush(t, p)
			checkStates(t, st, expected(append(rs, rcpt("acc1", "w1", wamux.ReceiptRead, 5))))
		})
	}
}

// TestLateReceiptAudited: a stronger receipt whose event precedes the state
// it would replace, arriving after the late window, goes to the audit
// table and leaves the state alone; inside the window it applies.
func TestLateReceiptAudited(t *testing.T) {
	st := openSQLite(t)
	clock := fakeclock.NewAt(base)
	set, err := settings.Load(context.Background(), st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	p := startPipeline(t, receipts.Config{Store: st, Now: clock.Now, Settings: set})
	ingest(t, p, rcpt("acc1", "w1", wamux.ReceiptSent, 100), rcpt("acc1", "w2", wamux.ReceiptSent, 100))
	flush(t, p)
	clock.Advance(time.Minute) // inside the 5 min window
	ingest(t, p, rcpt("acc1", "w1", wamux.ReceiptDelivered, 50))
	flush(t, p)
	clock.Advance(10 * time.Minute) // w2's state has stood past the window
	late := rcpt("acc1", "w2", wamux.ReceiptDelivered, 50)
	ingest(t, p, late)
	flush(t, p)

	checkStates(t, st, map[store.StateKey]wamux.Receipt{
		{AccountID: "acc1", MessageID: "w1"}: rcpt("acc1", "w1", wamux.ReceiptDelivered, 50),
		{AccountID: "acc1", MessageID: "w2"}: rcpt("acc1", "w2", wamux.ReceiptSent, 100),
	})
	audit, err := st.ListLateReceipts(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 1 || audit[0].MessageID != "w2" || audit[0].Type != wamux.ReceiptDelivered || audit[0].Reason != receipts.LateReason {
		t.Fatalf("audit = %+v, want the late delivered of w2", audit)
	}
	if s := p.Stats(); s.Late != 1 || s.Applied != 3 {
		t.Fatalf("stats = %+v, want 1 late, 3 applied", s)
	}
}

// TestResolvesMessages: statuses move outbound messages forward, adopt a
// wamid through the callback data of an unknown send, fail a message on a
// permanent code with its reason, and a status of a message not known yet
// is kept as merged state with the status the dispatcher will apply.
func TestResolvesMessages(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			ctx := context.Background()
			msg := func(id string, status wamux.Status, wamid string) {
				m := wamux.Message{ID: id, BizType: "otp", AccountID: "acc1", To: "+491", Type: "text",
					Payload: []byte(`{"body":"x"}`), ContentHash: id, Status: wamux.StatusQueued}
				if _, err := st.InsertMessages(ctx, []wamux.Message{m}); err != nil {
					t.Fatal(err)
				}
				if _, err := st.UpdateMessage(ctx, store.MessageUpdate{MsgID: id, Status: status, WAMID: wamid}); err != nil {
					t.Fatal(err)
				}
			}
			msg("m-accepted", wamux.StatusAccepted, "w1")
			msg("m-unknown", wamux.StatusUnknown, "")
			msg("m-perm", wamux.StatusSent, "w3")
			msg("m-read", wamux.StatusRead, "w4")
			msg("m-unknown2", wamux.StatusUnknown, "")

			p := startPipeline(t, receipts.Config{Store: st})
			adopt := rcpt("acc1", "w2", wamux.ReceiptSent, 2)
			adopt.CallbackData = "m-unknown"
			perm := rcpt("acc1", "w3", wamux.ReceiptFailed, 3)
			perm.ErrorCode, perm.ErrorTitle = 131049, "healthy ecosystem engagement"
			transientFail := rcpt("acc1", "w6", wamux.ReceiptFailed, 3)
			transientFail.ErrorCode, transientFail.CallbackData = 131000, "m-unknown2"
			ingest(t, p,
				rcpt("acc1", "w1", wamux.ReceiptDelivered, 1),
				adopt, perm, transientFail,
				rcpt("acc1", "w4", wamux.ReceiptSent, 4), // older than read: no regression
				rcpt("acc1", "w5", wamux.ReceiptRead, 5), // no message yet
			)
			flush(t, p)

			want := map[string]struct {
				status wamux.Status
				wamid  string
				errHas string
			}{
				"m-accepted": {wamux.StatusDelivered, "w1", ""},
				"m-unknown":  {wamux.StatusSent, "w2", ""},
				"m-perm":     {wamux.StatusFailed, "w3", "131049"},
				"m-read":     {wamux.StatusRead, "w4", ""},
				"m-unknown2": {wamux.StatusAccepted, "w6", "131000"},
			}
			for id, w := range want {
				m, err := st.GetMessage(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if m.Status != w.status || m.WAMID != w.wamid || !strings.Contains(m.LastError, w.errHas) {
					t.Errorf("%s = %s wamid %q last_error %q, want %s wamid %q error with %q", id, m.Status, m.WAMID, m.LastError,
						w.status, w.wamid, w.errHas)
				}
			}
			states, err := st.GetStates(ctx, []store.StateKey{{AccountID: "acc1", MessageID: "w5"}})
			if err != nil {
				t.Fatal(err)
			}
			s, ok := states[store.StateKey{AccountID: "acc1", MessageID: "w5"}]
			if !ok {
				t.Fatal("the status of a message not known yet was not kept")
			}
			if got, _ := wamux.MessageStatusFor(s.Type, s.ErrorCode, "", cloudapi.PermanentCode); got != wamux.StatusRead {
				t.Fatalf("MessageStatusFor(kept state) = %q, want read", got)
			}
		})
	}
}

// TestMessageStatusForProviderCodes: with the provider's classification,
// a failure code that can never be delivered fails the message and any
// other failure code leaves it accepted.
func TestMessageStatusForProviderCodes(t *testing.T) {
	for _, c := range []struct {
		typ    wamux.ReceiptType
		code   int
		want   wamux.Status
		reason bool
	}{
		{wamux.ReceiptSent, 0, wamux.StatusSent, false},
		{wamux.ReceiptDelivered, 0, wamux.StatusDelivered, false},
		{wamux.ReceiptRead, 0, wamux.StatusRead, false},
		{wamux.ReceiptFailed, 131049, wamux.StatusFailed, true},
		{wamux.ReceiptFailed, 132001, wamux.StatusFailed, true},
		{wamux.ReceiptFailed, 131000, wamux.StatusAccepted, true},
		{"played", 0, "", false},
	} {
		got, reason := wamux.MessageStatusFor(c.typ, c.code, "", cloudapi.PermanentCode)
		if got != c.want || (reason != "") != c.reason {
			t.Errorf("MessageStatusFor(%s, %d) = %q, %q; want %q, reason %v", c.typ, c.code, got, reason, c.want, c.reason)
		}
	}
}

// TestSwitchesWithoutRestart: with apply_state off receipts are accepted
// and kept in the log but not merged; switching it on merges them. With
// Bloom off, repeats are found by the store.
func TestSwitchesWithoutRestart(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	set, err := settings.Load(ctx, st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	p := startPipeline(t, receipts.Config{Store: st, Settings: set, LRU: receipts.LRUConfig{PerAccount: 1}})
	if _, err := set.Update(ctx, map[string]string{"apply_state": "false", "bloom": "false"}); err != nil {
		t.Fatal(err)
	}
	rs := []wamux.Receipt{rcpt("acc1", "w1", wamux.ReceiptSent, 1), rcpt("acc1", "w2", wamux.ReceiptRead, 2)}
	if res := ingest(t, p, rs...); res.Accepted != 2 {
		t.Fatalf("accepted %d, want 2", res.Accepted)
	}
	logged, err := st.ListReceiptLog(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(logged) != 2 {
		t.Fatalf("log holds %d, want the 2 receipts waiting", len(logged))
	}
	if s := p.Stats(); s.Processed != 0 || s.Spilled != 2 {
		t.Fatalf("processed %d, spilled %d while apply_state is off; want 0 and 2", s.Processed, s.Spilled)
	}
	if _, err := set.Update(ctx, map[string]string{"apply_state": "true"}); err != nil {
		t.Fatal(err)
	}
	flush(t, p)
	checkStates(t, st, expected(rs))
	if s := p.Stats(); s.ReadBack != 2 {
		t.Fatalf("read back %d from the log, want the 2 that waited", s.ReadBack)
	}

	ingest(t, p, rs[0]) // the 1-entry LRU forgot it: the store finds it
	flush(t, p)
	if s := p.Stats(); s.DedupStore != 1 || s.DedupBloom != 0 {
		t.Fatalf("dedup store=%d bloom=%d, want the repeat found by the store with Bloom off", s.DedupStore, s.DedupBloom)
	}
}

// flakyStore fails InsertReceipts with an infrastructure error a number
// of times, and refuses any batch holding the message "poison" as invalid:
// real store underneath, faults injected at its edge.
type flakyStore struct {
	store.Store
	failures    atomic.Int32
	putFailures atomic.Int32
}

// PutStates fails with an infrastructure error putFailures times: the
// receipts are stored (L3) by then, but their merge is not.
func (f *flakyStore) PutStates(ctx context.Context, states []store.MessageState) error {
	if f.putFailures.Add(-1) >= 0 {
		return errors.New("database is locked")
	}
	return f.Store.PutStates(ctx, states)
}

func (f *flakyStore) InsertReceipts(ctx context.Context, rs []wamux.Receipt) ([]bool, error) {
	if f.failures.Add(-1) >= 0 {
		return nil, errors.New("disk I/O error")
	}
	for _, r := range rs {
		if r.MessageID == "poison" {
			return nil, wamux.Errorf(wamux.EInvalid, "receipt %q cannot be stored", r.MessageID)
		}
	}
	return f.Store.InsertReceipts(ctx, rs)
}

// TestFailures: transient store errors are retried and lose nothing,
// even beyond the bounded retry (the batch stays in the log and is read
// back); poison is dead-lettered with its reason and blocks nothing.
func TestFailures(t *testing.T) {
	st := openSQLite(t)
	f := &flakyStore{Store: st}
	f.failures.Store(4) // more than Attempts: one batch goes back to the log
	p := startPipeline(t, receipts.Config{Store: f, Retry: receipts.RetryConfig{Attempts: 3, Base: time.Millisecond, Max: 5 * time.Millisecond}})
	good := []wamux.Receipt{rcpt("acc1", "w1", wamux.ReceiptSent, 1), rcpt("acc1", "w2", wamux.ReceiptDelivered, 2)}
	ingest(t, p, append(good, rcpt("acc1", "poison", wamux.ReceiptRead, 3))...)
	flush(t, p)
	checkStored(t, st, good)
	checkStates(t, st, expected(good))
	dead, err := st.ListDeadLetters(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || !strings.Contains(string(dead[0].Payload), "poison") || !strings.Contains(dead[0].Reason, "cannot be stored") {
		t.Fatalf("dead letters = %+v, want the poison receipt with its reason", dead)
	}
	if s := p.Stats(); s.Retries < 3 || s.DeadLetters != 1 {
		t.Fatalf("stats = %+v, want retries and one dead letter", s)
	}
}

// TestIngestRejectsInvalid: a receipt that does not normalize fails the
// whole call and stores nothing.
func TestIngestRejectsInvalid(t *testing.T) {
	st := openSQLite(t)
	p := startPipeline(t, receipts.Config{Store: st})
	for name, r := range map[string]wamux.Receipt{
		"no message id": {AccountID: "a", Type: wamux.ReceiptSent, EventTime: base},
		"no account":    {MessageID: "w", Type: wamux.ReceiptSent, EventTime: base},
		"bad type":      {AccountID: "a", MessageID: "w", Type: "played", EventTime: base},
		"no time":       {AccountID: "a", MessageID: "w", Type: wamux.ReceiptSent},
		"callback data of 513 characters": {AccountID: "a", MessageID: "w", Type: wamux.ReceiptSent, EventTime: base,
			CallbackData: strings.Repeat("x", 513)},
	} {
		_, err := p.Ingest(context.Background(), "agent", []wamux.Receipt{rcpt("a", "ok", wamux.ReceiptSent, 1), r})
		if wamux.ErrorCode(err) != wamux.EInvalid {
			t.Errorf("%s: err = %v, want invalid", name, err)
		}
	}
	logged, err := st.ListReceiptLog(context.Background(), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(logged) != 0 || p.Stats().Appended != 0 {
		t.Fatalf("invalid calls stored %d receipts", len(logged))
	}
	if res := ingest(t, p, rcpt("a", "w", wamux.ReceiptSent, 1), rcpt("a", "w", wamux.ReceiptSent, 1)); res.Accepted != 1 || res.Duplicates != 1 {
		t.Fatalf("result = %+v, want 1 accepted, 1 duplicate", res)
	}
	if res := ingest(t, p, rcpt("a", "w", wamux.ReceiptSent, 1)); res.Accepted != 0 || res.Duplicates != 1 {
		t.Fatalf("repeat result = %+v, want an L1 duplicate", res)
	}
	// Meta's limit on callback data is in characters: 512 of them in
	// two bytes each are taken.
	long := rcpt("a", "w2", wamux.ReceiptSent, 1)
	long.CallbackData = strings.Repeat("é", 512)
	if res := ingest(t, p, long); res.Accepted != 1 {
		t.Fatalf("512 two-byte characters of callback data: %+v, want accepted", res)
	}
}

// TestMergeFailsAfterStore: when the merge of a batch fails beyond the
// bounded retry after L3 stored its receipts, the batch read back from the
// log is merged anyway: the dedup layers would call it a duplicate.
func TestMergeFailsAfterStore(t *testing.T) {
	st := openSQLite(t)
	f := &flakyStore{Store: st}
	f.putFailures.Store(3)
	p := startPipeline(t, receipts.Config{Store: f, Retry: receipts.RetryConfig{Attempts: 2, Base: time.Millisecond, Max: 2 * time.Millisecond}})
	rs := []wamux.Receipt{rcpt("acc1", "w1", wamux.ReceiptSent, 1), rcpt("acc1", "w1", wamux.ReceiptRead, 2), rcpt("acc1", "w2", wamux.ReceiptDelivered, 3)}
	ingest(t, p, rs...)
	flush(t, p)
	checkStored(t, st, rs)
	checkStates(t, st, expected(rs))
	if s := p.Stats(); s.ReadBack == 0 || f.putFailures.Load() >= 0 {
		t.Fatalf("stats %+v, put failures left %d: the failure path was not taken", s, f.putFailures.Load())
	}
}

// TestRestartRepeatsPartlyAcknowledgedEntry: the embedded log keeps one
// entry per append and its acknowledgements in memory. A crash after part
// of an entry was processed and acknowledged leaves the whole entry, so
// the next Start processes the acknowledged receipts again, which must
// change nothing, and the others for the first time.
func TestRestartRepeatsPartlyAcknowledgedEntry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wamux.db")
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rs := []wamux.Receipt{
		rcpt("acc1", "w1", wamux.ReceiptSent, 1), rcpt("acc1", "w1", wamux.ReceiptRead, 3),
		rcpt("acc2", "w2", wamux.ReceiptDelivered, 2), rcpt("acc1", "w1", wamux.ReceiptDelivered, 2),
	}
	ids, err := st.AppendReceiptLog(ctx, rs)
	if err != nil {
		t.Fatal(err)
	}
	// The first two were processed (stored, merged) and acknowledged
	// before the crash; w1's state is read, the strongest it will get.
	if _, err := st.InsertReceipts(ctx, rs[:2]); err != nil {
		t.Fatal(err)
	}
	top := rs[1]
	if err := st.PutStates(ctx, []store.MessageState{{StateKey: store.StateKey{AccountID: "acc1", MessageID: "w1"},
		Type: top.Type, EventTime: top.EventTime}}); err != nil {
		t.Fatal(err)
	}
	if n, err := st.AckReceiptLog(ctx, ids[:2]); err != nil || n != 2 {
		t.Fatalf("ack = %d, %v; want 2", n, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st2, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	p := startPipeline(t, receipts.Config{Store: st2})
	checkStates(t, st2, expected(rs))
	left, err := st2.ListReceiptLog(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("log still holds %d receipts after recovery", len(left))
	}
	for _, k := range []struct{ acc, msg string }{{"acc1", "w1"}, {"acc2", "w2"}} {
		got, err := st2.ListReceipts(ctx, k.acc, k.msg)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{"w1": 3, "w2": 1}[k.msg]; len(got) != want {
			t.Fatalf("%s holds %d receipts, want %d", k.msg, len(got), want)
		}
	}
	if s := p.Stats(); s.Applied != 1 {
		// w1's sent and read were merged before the crash; its delivered
		// is weaker than read; only w2's delivered changes a state.
		t.Fatalf("applied %d after restart, want 1 (stats %+v)", s.Applied, s)
	}
}

// TestPausedStartKeepsBacklog: receipts left in the log by the last run
// (one of them stored by L3 but never merged: the crash came between) are
// not merged at Start while apply_state is off; switched on, they are,
// whatever the dedup layers say, and only this run's receipts count in
// Flush's bookkeeping.
func TestPausedStartKeepsBacklog(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	set, err := settings.Load(ctx, st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	// Bloom off: every key is confirmed against the store, so the receipt
	// L3 stored before the crash is found stored and would be skipped, if
	// the backlog were not merged whatever the dedup layers say.
	if _, err := set.Update(ctx, map[string]string{"apply_state": "false", "bloom": "false"}); err != nil {
		t.Fatal(err)
	}
	backlog := []wamux.Receipt{rcpt("acc1", "w1", wamux.ReceiptSent, 1), rcpt("acc1", "w1", wamux.ReceiptRead, 3),
		rcpt("acc2", "w2", wamux.ReceiptDelivered, 2)}
	if _, err := st.AppendReceiptLog(ctx, backlog); err != nil {
		t.Fatal(err)
	}
	if _, err := st.InsertReceipts(ctx, backlog[1:2]); err != nil {
		t.Fatal(err)
	}

	p := startPipeline(t, receipts.Config{Store: st, Settings: set})
	// Start returned: had it recovered, the states would be there now.
	states, err := st.GetStates(ctx, []store.StateKey{{AccountID: "acc1", MessageID: "w1"}, {AccountID: "acc2", MessageID: "w2"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 0 {
		t.Fatalf("apply_state is off, yet Start merged %d states", len(states))
	}
	fresh := rcpt("acc2", "w3", wamux.ReceiptRead, 4)
	ingest(t, p, fresh)
	if logged, err := st.ListReceiptLog(ctx, 0, 10); err != nil || len(logged) != 4 {
		t.Fatalf("log holds %d (%v), want the 3 left and the new one", len(logged), err)
	}

	if _, err := set.Update(ctx, map[string]string{"apply_state": "true"}); err != nil {
		t.Fatal(err)
	}
	flush(t, p)
	all := append(backlog, fresh)
	testwait.ForNil(t, 10*time.Second, func() error {
		logged, err := st.ListReceiptLog(ctx, 0, 10)
		if err != nil {
			return err
		}
		if len(logged) > 0 {
			return fmt.Errorf("log still holds %d receipts after apply_state went on", len(logged))
		}
		return nil
	})
	checkStates(t, st, expected(all))
	if s := p.Stats(); s.Appended != 1 || s.Processed != 1 {
		t.Fatalf("appended %d, processed %d; want 1 and 1 (the backlog is not this run's)", s.Appended, s.Processed)
	}
}

// gatedStates holds every PutStates until release is closed (entered tells
// the first one has begun), and counts the FindMessages calls that ask for
// a wamid whose state is not stored yet: real store underneath, timing
// controlled at its edge.
type gatedStates struct {
	store.Store
	entered chan struct{}
	once    sync.Once
	release chan struct{}
	early   atomic.Int32
}

func (g *gatedStates) PutStates(ctx context.Context, states []store.MessageState) error {
	g.once.Do(func() { close(g.entered) })
	<-g.release
	return g.Store.PutStates(ctx, states)
}

func (g *gatedStates) FindMessages(ctx context.Context, wamids, callbacks []string) ([]wamux.Message, error) {
	keys := make([]store.StateKey, len(wamids))
	for i, w := range wamids {
		keys[i] = store.StateKey{AccountID: "acc1", MessageID: w}
	}
	if got, err := g.Store.GetStates(ctx, keys); err != nil || len(got) < len(keys) {
		g.early.Add(1)
	}
	return g.Store.FindMessages(ctx, wamids, callbacks)
}

// TestStatusMeetsWAMIDRecordedMeanwhile: a status for a wamid no message
// has yet is being merged when the dispatcher records that wamid (the
// send's response came after the webhook) and finds no state to apply,
// because the state is not written yet. The pipeline looks the message up
// only once the state is stored, so one of the two sides always sees the
// other: the message ends delivered. Looking it up while the state write
// is in flight (as the pipeline once did, to overlap them) misses it, and
// the status is never applied.
func TestStatusMeetsWAMIDRecordedMeanwhile(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.open(t)
			ctx := context.Background()
			m := wamux.Message{ID: "m1", BizType: "otp", AccountID: "acc1", To: "+491", Type: "text",
				Payload: []byte(`{"body":"x"}`), ContentHash: "m1", Status: wamux.StatusQueued}
			if _, err := st.InsertMessages(ctx, []wamux.Message{m}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.UpdateMessage(ctx, store.MessageUpdate{MsgID: "m1", Status: wamux.StatusSending}); err != nil {
				t.Fatal(err)
			}
			gs := &gatedStates{Store: st, entered: make(chan struct{}), release: make(chan struct{})}
			p := startPipeline(t, receipts.Config{Store: gs})
			ingest(t, p, rcpt("acc1", "wX", wamux.ReceiptDelivered, 1))
			select {
			case <-gs.entered:
			case <-time.After(10 * time.Second):
				close(gs.release)
				t.Fatal("the pipeline never wrote the state")
			}
			// The dispatcher records the send's response, then looks for an
			// early status: there is none to see yet.
			if ok, err := st.UpdateMessage(ctx, store.MessageUpdate{MsgID: "m1", From: []wamux.Status{wamux.StatusSending},
				Status: wamux.StatusAccepted, WAMID: "wX"}); err != nil || !ok {
				close(gs.release)
				t.Fatalf("record wamid: ok %v, err %v", ok, err)
			}
			key := store.StateKey{AccountID: "acc1", MessageID: "wX"}
			states, err := st.GetStates(ctx, []store.StateKey{key})
			if _, found := states[key]; err != nil || found {
				close(gs.release)
				t.Fatalf("state visible before its write was let through (err %v): the test's interleaving did not happen", err)
			}
			close(gs.release)
			flush(t, p)
			got, err := st.GetMessage(ctx, "m1")
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != wamux.StatusDelivered {
				t.Errorf("message status = %s, want delivered: the status was lost between pipeline and dispatcher", got.Status)
			}
			if n := gs.early.Load(); n != 0 {
				t.Errorf("%d message lookups ran before the states they resolve were stored", n)
			}
		})
	}
}

// TestIdlePartitionReportsNoLag: once a partition has processed everything
// it was given, wamux_receipts_partition_lag_seconds reads 0, however old
// its last batch was; a backlog drained after a pause or a restart must not
// keep the WamuxReceiptLag alert firing on a partition with nothing left.
func TestIdlePartitionReportsNoLag(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := startPipeline(t, receipts.Config{Store: openSQLite(t), Registry: reg})
	old := rcpt("acc1", "w1", wamux.ReceiptSent, 0)
	old.ReceivedAt = time.Now().Add(-time.Hour) // taken in an hour ago, say before a restart
	ingest(t, p, old)
	flush(t, p)
	lag := func() (max float64, n int) {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() != "wamux_receipts_partition_lag_seconds" {
				continue
			}
			for _, m := range f.GetMetric() {
				n++
				max = math.Max(max, m.GetGauge().GetValue())
			}
		}
		return max, n
	}
	testwait.ForNil(t, 10*time.Second, func() error {
		max, n := lag()
		if n == 0 {
			t.Fatal("no partition lag series")
		}
		if max > 0 {
			return fmt.Errorf("partition lag still %.0f s with nothing left to process", max)
		}
		return nil
	})
}
