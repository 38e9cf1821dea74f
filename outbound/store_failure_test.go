package outbound_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/outbound"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
)

// flakyStore fails the UpdateMessage calls its rule picks, as a store
// whose writes fail for a while (disk full, connection lost) does. With
// applied the write is made before the error is returned: a commit whose
// answer was lost.
type flakyStore struct {
	store.Store
	mu      sync.Mutex
	rule    func(store.MessageUpdate) bool
	left    int // failures still to inject
	applied bool
	failed  atomic.Int64
}

func (s *flakyStore) wrap(st store.Store) store.Store { s.Store = st; return s }

// failNext makes the next n updates rule picks fail.
func (s *flakyStore) failNext(n int, applied bool, rule func(store.MessageUpdate) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.left, s.applied, s.rule = n, applied, rule
}

func (s *flakyStore) UpdateMessage(ctx context.Context, u store.MessageUpdate) (bool, error) {
	s.mu.Lock()
	fail := s.left > 0 && s.rule(u)
	if fail {
		s.left--
	}
	applied := s.applied
	s.mu.Unlock()
	if !fail {
		return s.Store.UpdateMessage(ctx, u)
	}
	s.failed.Add(1)
	if applied {
		if _, err := s.Store.UpdateMessage(ctx, u); err != nil {
			return false, err
		}
	}
	return false, errors.New("flaky store: write failed")
}

// to picks the updates that move a message to status st.
func to(st wamux.Status) func(store.MessageUpdate) bool {
	return func(u store.MessageUpdate) bool { return u.Status == st }
}

// storeFailureEnv is an environment whose dispatcher writes through fs,
// with one account "acc".
func storeFailureEnv(t *testing.T, fs *flakyStore, o envOpts) *env {
	t.Helper()
	o.wrapStore = fs.wrap
	e := newEnv(t, o)
	e.addAccount("acc", "9201", 100, 10, sim.Limits{Rate: 1000})
	return e
}

// TestAcceptedOutcomeRecordedAfterStoreFailures: the provider accepted the
// message, and the write recording it failed three times. The message
// must end accepted with its wamid, sent once, not stay in sending.
func TestAcceptedOutcomeRecordedAfterStoreFailures(t *testing.T) {
	fs := &flakyStore{}
	e := storeFailureEnv(t, fs, envOpts{})
	fs.failNext(3, false, to(wamux.StatusAccepted))
	m := textMsg(t, admit.Request{AccountID: "acc", To: "15559200001"})
	e.submit(m)
	testwait.For(t, "the accepted outcome stored", 10*time.Second, func() bool { return e.status(m.ID) == wamux.StatusAccepted })
	got, err := e.store.GetMessage(context.Background(), m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := e.sim.Messages("9201", "")[0].WAMID; got.WAMID != want {
		t.Fatalf("wamid %q, want %q", got.WAMID, want)
	}
	if n := fs.failed.Load(); n != 3 {
		t.Fatalf("%d writes failed, want 3", n)
	}
	if st := e.sim.Stats().Totals; st.Requests != 1 || st.Duplicates != 0 {
		t.Fatalf("provider saw %d requests, %d duplicates; want 1 and 0", st.Requests, st.Duplicates)
	}
}

// TestPermanentOutcomeRecordedAfterStoreFailures: a refusal whose write
// failed still ends the message failed, not sending.
func TestPermanentOutcomeRecordedAfterStoreFailures(t *testing.T) {
	fs := &flakyStore{}
	recipient := "15559200002"
	sp, wrap := newScripted(map[string]cloudapi.Result{
		recipient: {Outcome: cloudapi.Permanent, Code: 131026, HTTPStatus: 400, Reason: "131026: undeliverable"},
	})
	e := storeFailureEnv(t, fs, envOpts{provider: wrap})
	fs.failNext(3, false, to(wamux.StatusFailed))
	m := textMsg(t, admit.Request{AccountID: "acc", To: recipient})
	e.submit(m)
	testwait.For(t, "the failure stored", 10*time.Second, func() bool { return e.status(m.ID) == wamux.StatusFailed })
	if n := sp.callsTo(recipient); n != 1 {
		t.Fatalf("provider called %d times, want 1", n)
	}
}

// TestRetryAfterFailedRequeueWrite: a transient provider error whose
// requeue write failed is still retried and sent; the next attempt used
// to find the message in sending instead of queued, take that for
// "someone else moved it on" and drop it from the queue for good.
func TestRetryAfterFailedRequeueWrite(t *testing.T) {
	fs := &flakyStore{}
	recipient := "15559200003"
	sp, wrap := newScripted(map[string]cloudapi.Result{
		recipient: {Outcome: cloudapi.Retry, Code: 131000, HTTPStatus: 500, Reason: "131000: something went wrong"},
	})
	e := storeFailureEnv(t, fs, envOpts{provider: wrap})
	fs.failNext(3, false, to(wamux.StatusQueued))
	m := textMsg(t, admit.Request{AccountID: "acc", To: recipient})
	e.submit(m)
	testwait.For(t, "the retry accepted", 10*time.Second, func() bool { return e.status(m.ID) == wamux.StatusAccepted })
	if n := sp.callsTo(recipient); n != 2 {
		t.Fatalf("provider called %d times, want 2 (the refusal, then the retry)", n)
	}
}

// TestUnknownOutcomeCompensatedAfterFailedWrite: an unknown outcome whose
// write failed is still compensated: after the quiet period, with no
// status, it is resent once, not counted "resolved" for being found in
// sending.
func TestUnknownOutcomeCompensatedAfterFailedWrite(t *testing.T) {
	fs := &flakyStore{}
	var rp *recordingProvider
	e := storeFailureEnv(t, fs, envOpts{
		settings: map[string]string{"quiet_period": "200ms"},
		provider: func(base outbound.Provider) outbound.Provider {
			rp = &recordingProvider{inner: base, firstUnknown: true, calls: map[string]int{}}
			return rp
		},
	})
	fs.failNext(3, false, to(wamux.StatusUnknown))
	m := textMsg(t, admit.Request{AccountID: "acc", To: "15559200004"})
	e.submit(m)
	testwait.For(t, "the resend accepted", 10*time.Second, func() bool { return e.status(m.ID) == wamux.StatusAccepted })
	if n := rp.count(m.ID); n != 2 {
		t.Fatalf("provider called %d times, want 2 (the unknown attempt, then one resend)", n)
	}
	if got := metric(t, e, "wamux_resends_total", map[string]string{"outcome": "resent"}); got != 1 {
		t.Fatalf("resends = %v, want 1", got)
	}
}

// TestSendingWriteCommittedDespiteError: the write that marks a message
// sending committed, but its caller got an error (the answer was lost).
// The next attempt must still send it, once, although it finds sending
// instead of queued.
func TestSendingWriteCommittedDespiteError(t *testing.T) {
	fs := &flakyStore{}
	clk := fakeclock.New() // the retry after the failed write comes when the test moves it
	e := storeFailureEnv(t, fs, envOpts{clock: clk})
	fs.failNext(1, true, to(wamux.StatusSending))
	m := textMsg(t, admit.Request{AccountID: "acc", To: "15559200005"})
	e.submit(m)
	testwait.For(t, "the sending write failed and answered", 10*time.Second, func() bool {
		return fs.failed.Load() == 1 && e.d.AttemptsRunning("acc") == 0
	})
	e.d.Settle("acc")
	e.elapse(clk, time.Second)
	testwait.For(t, "the message accepted", 10*time.Second, func() bool { return e.status(m.ID) == wamux.StatusAccepted })
	if st := e.sim.Stats().Totals; st.Requests != 1 || st.Duplicates != 0 {
		t.Fatalf("provider saw %d requests, %d duplicates; want 1 and 0", st.Requests, st.Duplicates)
	}
	// One provider call, one attempt against max_attempts: the write that
	// committed counted it, its retry must not count it again.
	if got := e.message(m.ID).Attempts; got != 1 {
		t.Fatalf("stored attempts %d, want 1", got)
	}
}

// TestUnmarkedSendingMovesOffDisabledAccount: the write marking a routed
// message sending committed but answered an error, so the message waits on
// its account for a retry, never sent. When the account is disabled the
// message must move with its recipient to the other account and go out
// from there, not wait for the account to be enabled again.
func TestUnmarkedSendingMovesOffDisabledAccount(t *testing.T) {
	fs := &flakyStore{}
	clk := fakeclock.New() // frozen: the retry on a never comes due
	e := newEnv(t, envOpts{clock: clk, wrapStore: fs.wrap})
	e.addAccount("a", "9211", 100, 10, sim.Limits{Rate: 1000})
	e.addAccount("b", "9212", 100, 10, sim.Limits{Rate: 1000})
	fs.failNext(1, true, to(wamux.StatusSending))
	to := "15559210001"
	m := textMsg(t, admit.Request{MsgID: "m", To: to})
	if acc := e.submit(m)[0].Message.AccountID; acc != "a" {
		t.Fatalf("routed to %s, want a (equal ratios, smallest id)", acc)
	}
	testwait.For(t, "the sending write failed", 10*time.Second, func() bool {
		return fs.failed.Load() == 1 && e.d.AttemptsRunning("a") == 0
	})
	setState(t, e, "a", wamux.AccountDisabled)
	testwait.For(t, "the message accepted", 10*time.Second, func() bool { return e.status(m.ID) == wamux.StatusAccepted })
	if got := sentFrom(e, "9212", to); !slices.Equal(got, []string{"m"}) {
		t.Fatalf("b sent %v, want [m]", got)
	}
	if st := e.sim.Stats().Totals; st.Requests != 1 {
		t.Fatalf("provider saw %d requests, want 1", st.Requests)
	}
}

// TestStoreOutageAtStopLeavesUnknownForRestart: the store refuses the
// accepted outcome until the dispatcher stops. Stop's bound ends the
// tries; the message stays sending, and the next start treats it as an
// unknown outcome: a quiet period, then one resend with the same msg_id.
func TestStoreOutageAtStopLeavesUnknownForRestart(t *testing.T) {
	fs := &flakyStore{}
	e := storeFailureEnv(t, fs, envOpts{settings: map[string]string{"quiet_period": "200ms"}})
	fs.failNext(1<<30, false, to(wamux.StatusAccepted))
	m := textMsg(t, admit.Request{AccountID: "acc", To: "15559200006"})
	e.submit(m)
	testwait.For(t, "the accepted write failing", 10*time.Second, func() bool { return fs.failed.Load() >= 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_ = e.d.Stop(ctx) // cut short by the outage: expected
	if st := e.status(m.ID); st != wamux.StatusSending {
		t.Fatalf("after the stop status %s, want sending", st)
	}
	fs.failNext(0, false, nil)
	e.start()
	if st := e.status(m.ID); st != wamux.StatusUnknown {
		t.Fatalf("after the restart status %s, want unknown", st)
	}
	testwait.For(t, "the resend accepted", 10*time.Second, func() bool { return e.status(m.ID) == wamux.StatusAccepted })
	if got := metric(t, e, "wamux_resends_total", map[string]string{"outcome": "resent"}); got != 1 {
		t.Fatalf("resends = %v, want 1", got)
	}
	if st := e.sim.Stats().Totals; st.Requests != 2 || st.Duplicates != 1 {
		t.Fatalf("provider saw %d requests, %d duplicates; want 2 and the one counted resend", st.Requests, st.Duplicates)
	}
}
