package outbound_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/outbound"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
)

// gatedThrottle answers every call with 130429 once n calls are waiting,
// so that n sends are with the provider together, as the requests in
// flight when a number gets throttled are.
type gatedThrottle struct {
	mu      sync.Mutex
	n       int
	waiting int
	open    chan struct{}
	// answers overrides the 130429 for some recipients.
	answers map[string]cloudapi.Result
	// holdShort, when set, holds the answer for short until it is true.
	holdShort func() bool
	short     string
}

func (p *gatedThrottle) Send(ctx context.Context, dest cloudapi.Destination, msg wamux.Message) cloudapi.Result {
	p.mu.Lock()
	open := p.open
	p.waiting++
	if p.waiting == p.n {
		close(p.open)
		p.waiting, p.open = 0, make(chan struct{})
	}
	p.mu.Unlock()
	select {
	case <-open:
	case <-time.After(10 * time.Second): // not as many calls as expected: let the test fail, not hang
	}
	if msg.To == p.short && p.holdShort != nil {
		for deadline := time.Now().Add(10 * time.Second); !p.holdShort() && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	if r, ok := p.answers[msg.To]; ok {
		return r
	}
	return cloudapi.Result{Outcome: cloudapi.SlowDown, Code: 130429, Delay: cloudapi.ThroughputDelay, HTTPStatus: 400, Reason: "130429: rate limit hit"}
}

// TestCooldownCountedOnce: the requests in flight when the throttle that
// starts a cooldown comes back come back throttled too; they are echoes
// of the same overload (the limiter counts none of them) and start no
// cooldown, so wamux_account_cooldowns_total counts one. It counted every
// one of them.
func TestCooldownCountedOnce(t *testing.T) {
	clk := fakeclock.New()
	p := &gatedThrottle{n: 1, open: make(chan struct{})}
	e := newEnv(t, envOpts{clock: clk, provider: func(outbound.Provider) outbound.Provider { return p }})
	e.addAccount("acc", "7201", 100, 10, sim.Limits{Rate: 1000})
	send := func(tos ...string) {
		var msgs []wamux.Message
		for _, to := range tos {
			msgs = append(msgs, textMsg(t, admit.Request{AccountID: "acc", To: to}))
		}
		e.submit(msgs...)
		settle(t, e, "acc")
	}
	// Two counted throttles, more than ThrottleHold apart.
	send("15557200001")
	clk.Advance(2 * time.Second)
	send("15557200002")
	clk.Advance(2 * time.Second)
	if st := e.d.LimitState("acc"); st.State != wamux.AccountActive {
		t.Fatalf("after two throttles the account is in %s", st.State)
	}
	// The third starts the cooldown; the four new messages and the two
	// retried ones are in flight together.
	p.mu.Lock()
	p.n = 6
	p.mu.Unlock()
	send("15557200003", "15557200004", "15557200005", "15557200006")
	if st := e.d.LimitState("acc"); st.State != wamux.AccountCooldown {
		t.Fatalf("after the third throttle the account is in %s", st.State)
	}
	if got := metric(t, e, "wamux_account_cooldowns_total", map[string]string{"account": "acc"}); got != 1 {
		t.Fatalf("wamux_account_cooldowns_total = %v after one cooldown", got)
	}
}

// TestShorterCooldownNotStored: two requests in flight come back with
// account-wide pauses of different lengths, the longer first; the
// limiter keeps the longer one and so must the store, or a restart would
// resume the account early.
func TestShorterCooldownNotStored(t *testing.T) {
	clk := fakeclock.New()
	long, short := "15557300001", "15557300002"
	p := &gatedThrottle{n: 2, open: make(chan struct{}), answers: map[string]cloudapi.Result{
		long:  {Outcome: cloudapi.Cooldown, Code: 131048, Delay: cloudapi.SpamCooldown, HTTPStatus: 400, Reason: "131048: spam rate limit"},
		short: {Outcome: cloudapi.Cooldown, Code: 131057, Delay: cloudapi.MaintenanceDelay, HTTPStatus: 400, Reason: "131057: maintenance"},
	}}
	e := newEnv(t, envOpts{clock: clk, provider: func(outbound.Provider) outbound.Provider { return p }})
	e.addAccount("acc", "7301", 100, 10, sim.Limits{Rate: 1000})
	// The longer pause is answered, and applied, first.
	p.short = short
	p.holdShort = func() bool { return e.d.LimitState("acc").State == wamux.AccountCooldown }
	e.submit(textMsg(t, admit.Request{AccountID: "acc", To: long}), textMsg(t, admit.Request{AccountID: "acc", To: short}))
	settle(t, e, "acc")
	want := clk.Now().Add(cloudapi.SpamCooldown)
	if got := e.d.LimitState("acc").CooldownUntil; !got.Equal(want) {
		t.Fatalf("limiter cooldown until %v, want %v", got, want)
	}
	a, err := e.store.GetAccount(context.Background(), "acc")
	if err != nil {
		t.Fatal(err)
	}
	if !a.CooldownUntil.Equal(want) {
		t.Fatalf("stored cooldown_until %v, want %v (the longer pause)", a.CooldownUntil, want)
	}
}
