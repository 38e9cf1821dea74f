package outbound_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/outbound"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
)

// answersProvider answers the n-th call with answers[n-1], and every call
// beyond the list with the last answer; it never reaches the simulator.
type answersProvider struct {
	answers []cloudapi.Result
	mu      sync.Mutex
	calls   int
}

func (p *answersProvider) Send(context.Context, cloudapi.Destination, wamux.Message) cloudapi.Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	return p.answers[min(p.calls, len(p.answers))-1]
}

func (p *answersProvider) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// TestRestartKeepsAttempts: max_attempts counts certain failures and
// unknown outcomes, and a restart must not start the count again, or a
// message that always fails transiently is retried forever by a gateway
// that restarts often enough (a crash loop, frequent deploys). A throttle
// (131056 here) does not count, before or after the restart.
func TestRestartKeepsAttempts(t *testing.T) {
	clk := fakeclock.New() // frozen: a retry goes out only when the test moves it
	retry := cloudapi.Result{Outcome: cloudapi.Retry, Code: 131000, HTTPStatus: 500, Reason: "131000: something went wrong"}
	ap := &answersProvider{answers: []cloudapi.Result{
		{Outcome: cloudapi.PairLimit, Code: 131056, HTTPStatus: 400, Reason: "131056: pair rate limit"},
		retry,
	}}
	e := newEnv(t, envOpts{clock: clk, settings: map[string]string{"max_attempts": "3"},
		provider: func(outbound.Provider) outbound.Provider { return ap }})
	e.addAccount("acc", "9301", 100, 10, sim.Limits{Rate: 1000})
	m := textMsg(t, admit.Request{AccountID: "acc", To: "15559300001"})
	e.submit(m)
	// attempt lets the n-th call happen and waits until its outcome is stored.
	attempt := func(n int) wamux.Message {
		t.Helper()
		testwait.For(t, "the provider call", 10*time.Second, func() bool {
			if ap.count() < n {
				clk.Advance(10 * time.Minute)
				e.d.Kick()
				return false
			}
			return e.status(m.ID) != wamux.StatusSending
		})
		got, err := e.store.GetMessage(context.Background(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	attempt(1) // 131056: a throttle, not counted
	if got := attempt(2); got.Status != wamux.StatusQueued || got.Attempts != 1 {
		t.Fatalf("after a throttle and a failure: %s with %d attempts, want queued with 1", got.Status, got.Attempts)
	}
	e.stop()
	e.start()
	if got := attempt(3); got.Status != wamux.StatusQueued {
		t.Fatalf("after the second counted failure: %s (%q), want queued (the throttle does not count)", got.Status, got.LastError)
	}
	if got := attempt(4); got.Status != wamux.StatusFailed || got.Attempts != 3 {
		t.Fatalf("after the third counted failure: %s with %d attempts, want failed with 3", got.Status, got.Attempts)
	}
	if n := ap.count(); n != 4 {
		t.Fatalf("provider called %d times, want 4", n)
	}
}
