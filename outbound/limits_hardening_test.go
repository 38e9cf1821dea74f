package outbound_test

import (
	"context"
	"fmt"
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
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
)

// scriptedProvider answers the first call to each listed recipient with a
// scripted refusal and passes everything else to the real client.
type scriptedProvider struct {
	base  outbound.Provider
	mu    sync.Mutex
	first map[string]cloudapi.Result
	calls map[string]int
	total atomic.Int64
}

func (p *scriptedProvider) Send(ctx context.Context, dest cloudapi.Destination, msg wamux.Message) cloudapi.Result {
	p.total.Add(1)
	p.mu.Lock()
	p.calls[msg.To]++
	r, ok := p.first[msg.To]
	if ok {
		delete(p.first, msg.To)
	}
	p.mu.Unlock()
	if ok {
		return r
	}
	return p.base.Send(ctx, dest, msg)
}

func (p *scriptedProvider) callsTo(to string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[to]
}

func newScripted(first map[string]cloudapi.Result) (*scriptedProvider, func(outbound.Provider) outbound.Provider) {
	sp := &scriptedProvider{first: first, calls: map[string]int{}}
	return sp, func(base outbound.Provider) outbound.Provider { sp.base = base; return sp }
}

// TestBatchRoutingSpreadsOverPool: three idle, identical accounts; one
// batch of new recipients without account_id. Routing picks the account
// with the most headroom (tokens less queue); nothing is charged while the
// batch is routed, so the batch's earlier choices must count, or every
// recipient goes (and sticks) to the account with the smallest id.
func TestBatchRoutingSpreadsOverPool(t *testing.T) {
	clk := fakeclock.New() // frozen: no refill, nothing changes but routing
	e := newEnv(t, envOpts{clock: clk})
	for i, id := range []string{"a", "b", "c"} {
		e.addAccount(id, fmt.Sprintf("610%d", i), 10, 10, sim.Limits{Rate: 1000})
	}
	var batch []wamux.Message
	for i := 0; i < 30; i++ {
		batch = append(batch, textMsg(t, admit.Request{To: fmt.Sprintf("1555610%04d", i)}))
	}
	used := map[string]int{}
	for _, r := range e.submit(batch...) {
		used[r.Message.AccountID]++
	}
	for _, id := range []string{"a", "b", "c"} {
		if used[id] == 0 {
			t.Fatalf("batch of 30 new recipients routed %v: account %s never chosen", used, id)
		}
	}
}

// TestAccountWideThrottlePausesAccount: 80007 (WABA rate limit, an
// hourly window) comes back with a 60 s delay that Result documents as
// "for the account when SlowDown": the account pauses for it, not only
// the one recipient (the others must not be sent to right away).
func TestAccountWideThrottlePausesAccount(t *testing.T) {
	clk := fakeclock.New()
	sp, wrap := newScripted(map[string]cloudapi.Result{
		"15556200001": {Outcome: cloudapi.SlowDown, Code: 80007, Delay: cloudapi.WABALimitDelay, HTTPStatus: 400, Reason: "80007: rate limit"},
	})
	e := newEnv(t, envOpts{clock: clk, provider: wrap})
	e.addAccount("acc", "6201", 100, 10, sim.Limits{Rate: 1000})
	m := textMsg(t, admit.Request{AccountID: "acc", To: "15556200001"})
	e.submit(m)
	testwait.For(t, "the 80007 handled", 10*time.Second, func() bool {
		return sp.callsTo("15556200001") == 1 && e.status(m.ID) == wamux.StatusQueued
	})
	lim := e.d.LimitState("acc")
	if want := clk.Now().Add(cloudapi.WABALimitDelay); lim.State != wamux.AccountCooldown || lim.CooldownUntil.Before(want) {
		t.Fatalf("after 80007 with a %v delay the account is %s until %v; want paused until at least %v",
			cloudapi.WABALimitDelay, lim.State, lim.CooldownUntil, want)
	}
}

// TestReactivateEndsCooldown: the API's PATCH state=active promises
// "Re-activating ends any cooldown the gateway had set" and zeroes
// cooldown_until in the store: the adaptive limiter's cooldown must end
// too, or the account stays paused (and unroutable) until it runs out.
func TestReactivateEndsCooldown(t *testing.T) {
	clk := fakeclock.New()
	to := "15556300001"
	sp, wrap := newScripted(map[string]cloudapi.Result{
		to: {Outcome: cloudapi.Cooldown, Code: 131048, Delay: cloudapi.SpamCooldown, HTTPStatus: 400, Reason: "131048: spam rate limit"},
	})
	e := newEnv(t, envOpts{clock: clk, provider: wrap})
	e.addAccount("acc", "6301", 100, 10, sim.Limits{Rate: 1000})
	m := textMsg(t, admit.Request{AccountID: "acc", To: to})
	e.submit(m)
	testwait.For(t, "the cooldown", 10*time.Second, func() bool {
		return e.status(m.ID) == wamux.StatusQueued && e.d.LimitState("acc").State == wamux.AccountCooldown
	})
	// What PATCH /v1/accounts/acc {"state":"active"} does.
	ctx := context.Background()
	active, zero := wamux.AccountActive, time.Time{}
	a, err := e.store.UpdateAccount(ctx, "acc", store.AccountPatch{State: &active, CooldownUntil: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.d.AccountReactivated(ctx, a); err != nil {
		t.Fatal(err)
	}
	if st := e.d.LimitState("acc"); st.State != wamux.AccountActive {
		t.Fatalf("after PATCH state=active the limiter still has the account in %s until %v", st.State, st.CooldownUntil)
	}
	// A new recipient's message goes out at once (the clock is frozen, so
	// only the end of the cooldown can let it through).
	other := "15556300002"
	e.submit(textMsg(t, admit.Request{AccountID: "acc", To: other}))
	testwait.For(t, "a message sent after re-activation", 10*time.Second, func() bool { return sp.callsTo(other) == 1 })
}

// TestStoredLimitOutOfBoundsStillStarts: an account stored with a rate
// below what the limiter takes (the API refuses one now; a store written
// before may hold one) starts at the lowest rate and sends, instead of
// keeping the dispatcher, and so the gateway, from starting.
func TestStoredLimitOutOfBoundsStillStarts(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.addAccount("slow", "7501", 0.0001, 0, sim.Limits{Rate: 1000})
	if lim := e.d.LimitState("slow"); lim.Rate != ratelimit.MinLimitRate || lim.Burst != 1 {
		t.Fatalf("limit %v/s burst %d, want %v/s burst 1", lim.Rate, lim.Burst, ratelimit.MinLimitRate)
	}
	m := textMsg(t, admit.Request{AccountID: "slow", To: "15557500001"})
	e.submit(m)
	testwait.For(t, "the message accepted", 10*time.Second, func() bool { return e.status(m.ID) == wamux.StatusAccepted })
}

// TestStoredLimitOutOfBoundsTakesOtherChanges: an account stored with a
// rate below the limiter's bounds (started at the lowest one) takes a
// change of something else, here a disable, as any account does: the
// change is stored already, and refusing it in the dispatcher would leave
// the account sending as before.
func TestStoredLimitOutOfBoundsTakesOtherChanges(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.addAccount("slow", "7502", 0.0001, 0, sim.Limits{Rate: 1000})
	disabled := wamux.AccountDisabled
	a, err := e.store.UpdateAccount(context.Background(), "slow", store.AccountPatch{State: &disabled})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.d.AccountChanged(context.Background(), a); err != nil {
		t.Fatalf("disabling the account: %v", err)
	}
	if lim := e.d.LimitState("slow"); lim.Rate != ratelimit.MinLimitRate || lim.Burst != 1 {
		t.Fatalf("limit %v/s burst %d, want %v/s burst 1", lim.Rate, lim.Burst, ratelimit.MinLimitRate)
	}
}
