package outbound_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
)

// hold stops whoever reaches it (wait) until the test releases it;
// arrived is closed when the first one gets there.
type hold struct {
	arrived     chan struct{}
	open        chan struct{} // closed by release
	arrivedOnce sync.Once
	openOnce    sync.Once
}

func newHold() hold { return hold{arrived: make(chan struct{}), open: make(chan struct{})} }

func (h *hold) release() { h.openOnce.Do(func() { close(h.open) }) }

func (h *hold) wait(ctx context.Context) error {
	h.arrivedOnce.Do(func() { close(h.arrived) })
	select {
	case <-h.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// cooldownWriteGate holds the dispatcher's store write of a cooldown
// (UpdateAccount with cooldown_until) until the test releases it: the
// limiter has started the cooldown, the store does not know it yet.
type cooldownWriteGate struct {
	store.Store
	hold
}

func newCooldownWriteGate() *cooldownWriteGate { return &cooldownWriteGate{hold: newHold()} }

func (g *cooldownWriteGate) wrap(st store.Store) store.Store { g.Store = st; return g }

func (g *cooldownWriteGate) UpdateAccount(ctx context.Context, id string, p store.AccountPatch) (wamux.Account, error) {
	if p.CooldownUntil != nil {
		if err := g.wait(ctx); err != nil {
			return wamux.Account{}, err
		}
	}
	return g.Store.UpdateAccount(ctx, id, p)
}

// cooldownLogGate holds the worker at its "account cooling down" log
// until the test releases it: the limiter has started the cooldown, the
// worker has not begun to store it. (A renamed message makes the test
// time out waiting for it, never pass unheld.)
type cooldownLogGate struct {
	slog.Handler
	hold
}

func newCooldownLogGate() *cooldownLogGate {
	return &cooldownLogGate{Handler: quietLog().Handler(), hold: newHold()}
}

func (g *cooldownLogGate) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "account cooling down" {
		if err := g.wait(ctx); err != nil {
			return err
		}
	}
	return g.Handler.Handle(ctx, r)
}

// throttledAccount sends one message from account "acc" that the provider
// answers with 131048 (spam rate limit): the gateway cools the account
// down. The clock is frozen, so the cooldown ends only when something
// ends it. o gives the dispatcher's store wrapper and logger, if any.
func throttledAccount(t *testing.T, number string, o envOpts) (*env, *fakeclock.Clock, *scriptedProvider, wamux.Message) {
	t.Helper()
	clk := fakeclock.New()
	to := "1555" + number + "0001"
	sp, wrap := newScripted(map[string]cloudapi.Result{
		to: {Outcome: cloudapi.Cooldown, Code: 131048, Delay: cloudapi.SpamCooldown, HTTPStatus: 400, Reason: "131048: spam rate limit"},
	})
	o.clock, o.provider = clk, wrap
	e := newEnv(t, o)
	e.addAccount("acc", number, 100, 10, sim.Limits{Rate: 1000})
	m := textMsg(t, admit.Request{AccountID: "acc", To: to})
	e.submit(m)
	return e, clk, sp, m
}

// patchRate does what PATCH /v1/accounts/acc {"rate_per_sec":rate} does:
// store the rate, hand the stored account to the dispatcher.
func patchRate(t *testing.T, e *env, rate float64) wamux.Account {
	t.Helper()
	ctx := context.Background()
	a, err := e.store.UpdateAccount(ctx, "acc", store.AccountPatch{RatePerSec: &rate})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.d.AccountChanged(ctx, a); err != nil {
		t.Fatal(err)
	}
	return a
}

// assertHeld checks that the account still holds a new recipient's
// message: with the clock frozen, only an early end of the cooldown could
// let it out.
func assertHeld(t *testing.T, e *env, sp *scriptedProvider, to string) {
	t.Helper()
	e.submit(textMsg(t, admit.Request{AccountID: "acc", To: to}))
	e.d.Settle("acc")
	testwait.For(t, "the attempts done", 10*time.Second, func() bool { return e.d.AttemptsRunning("acc") == 0 })
	if n := sp.callsTo(to); n != 0 {
		t.Fatalf("%d provider calls to a new recipient while the account cools down, want 0", n)
	}
}

// TestRatePatchKeepsCooldownNotYetStored: an operator changes only the
// rate of an account the provider has just throttled, between the limiter
// starting the cooldown and the worker storing it. The account the PATCH
// stored and handed over has no cooldown_until yet; that is no operator
// ending the cooldown (only state "active" is), so the account must stay
// paused. It was taken for PATCH state=active: the cooldown ended at once
// and the account sent into the provider's throttle.
func TestRatePatchKeepsCooldownNotYetStored(t *testing.T) {
	gate := newCooldownWriteGate()
	e, clk, sp, m := throttledAccount(t, "7801", envOpts{wrapStore: gate.wrap})
	t.Cleanup(gate.release) // runs before the dispatcher's Stop
	select {
	case <-gate.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the cooldown's store write")
	}
	lim := e.d.LimitState("acc")
	if want := clk.Now().Add(cloudapi.SpamCooldown); lim.State != wamux.AccountCooldown || !lim.CooldownUntil.Equal(want) {
		t.Fatalf("after 131048 the limiter has the account %s until %v, want cooldown until %v", lim.State, lim.CooldownUntil, want)
	}

	if a := patchRate(t, e, 50); !a.CooldownUntil.IsZero() {
		t.Fatalf("the PATCH read cooldown_until %v; the test needs it before the cooldown is stored", a.CooldownUntil)
	}
	if got := e.d.LimitState("acc"); got.State != wamux.AccountCooldown || !got.CooldownUntil.Equal(lim.CooldownUntil) {
		t.Fatalf("after a rate-only PATCH the limiter has the account %s until %v, want cooldown until %v", got.State, got.CooldownUntil, lim.CooldownUntil)
	}

	gate.release()
	testwait.For(t, "the cooldown stored and the message queued again", 10*time.Second, func() bool {
		a, err := e.store.GetAccount(context.Background(), "acc")
		return err == nil && a.CooldownUntil.Equal(lim.CooldownUntil) && e.status(m.ID) == wamux.StatusQueued && e.d.AttemptsRunning("acc") == 0
	})
	assertHeld(t, e, sp, "15557801002")
	if a, err := e.store.GetAccount(context.Background(), "acc"); err != nil || a.RatePerSec != 50 {
		t.Fatalf("stored account %+v, %v; want rate 50", a, err)
	}
}

// TestRatePatchKeepsStoredCooldown: the other order, the cooldown stored
// before the rate-only PATCH reads the account: it stays, in the limiter
// and in the store, and survives a restart with the same end.
func TestRatePatchKeepsStoredCooldown(t *testing.T) {
	e, clk, sp, m := throttledAccount(t, "7802", envOpts{})
	until := clk.Now().Add(cloudapi.SpamCooldown)
	testwait.For(t, "the cooldown stored and the message queued again", 10*time.Second, func() bool {
		a, err := e.store.GetAccount(context.Background(), "acc")
		return err == nil && a.CooldownUntil.Equal(until) && e.status(m.ID) == wamux.StatusQueued && e.d.AttemptsRunning("acc") == 0
	})

	if a := patchRate(t, e, 50); !a.CooldownUntil.Equal(until) {
		t.Fatalf("after a rate-only PATCH the stored cooldown_until is %v, want %v", a.CooldownUntil, until)
	}
	if got := e.d.LimitState("acc"); got.State != wamux.AccountCooldown || !got.CooldownUntil.Equal(until) {
		t.Fatalf("after a rate-only PATCH the limiter has the account %s until %v, want cooldown until %v", got.State, got.CooldownUntil, until)
	}
	assertHeld(t, e, sp, "15557802002")

	e.stop()
	e.start()
	if got := e.d.LimitState("acc"); got.State != wamux.AccountCooldown || !got.CooldownUntil.Equal(until) {
		t.Fatalf("after a restart the limiter has the account %s until %v, want cooldown until %v", got.State, got.CooldownUntil, until)
	}
	assertHeld(t, e, sp, "15557802003")
	if n := sp.callsTo(m.To); n != 1 {
		t.Fatalf("%d provider calls for the throttled message during the cooldown, want 1", n)
	}

	// Once the cooldown is over, the queued messages go out.
	clk.Advance(cloudapi.SpamCooldown)
	e.d.Kick()
	testwait.For(t, "the throttled message accepted after the cooldown", 10*time.Second, func() bool { return e.status(m.ID) == wamux.StatusAccepted })
}

// TestReactivationOutlastsCooldownWriteInFlight: the provider throttles
// an account, the limiter cools it down, and the worker's write of
// cooldown_until is still on its way to the store when an operator's
// PATCH state=active clears cooldown_until and ends the limiter's
// cooldown. The write landed after the PATCH: the store held the pause
// the operator had ended, so GET showed the account in cooldown and the
// next start paused it again. The re-activation must come after the
// write and leave the store without a cooldown.
func TestReactivationOutlastsCooldownWriteInFlight(t *testing.T) {
	gate := newCooldownWriteGate()
	e, _, _, m := throttledAccount(t, "7803", envOpts{wrapStore: gate.wrap})
	t.Cleanup(gate.release) // runs before the dispatcher's Stop
	awaitCooldown(t, e, gate.arrived, "the cooldown's store write")

	// The re-activation waits for the write in flight: it can finish
	// only once the write is released.
	reactivated := reactivate(t, e)
	gate.release()
	awaitReactivated(t, reactivated)
	assertReactivated(t, e, m)
}

// TestReactivationBeforeCooldownWriteBegins: the other order of the same
// race. The limiter has started the cooldown, the worker has not yet
// begun to store it when the operator's PATCH state=active is done; the
// worker's write came after all of it and put back the ended pause. The
// worker must store only a cooldown the limiter still holds.
func TestReactivationBeforeCooldownWriteBegins(t *testing.T) {
	logGate := newCooldownLogGate()
	e, _, _, m := throttledAccount(t, "7804", envOpts{logger: slog.New(logGate)})
	t.Cleanup(logGate.release) // runs before the dispatcher's Stop
	awaitCooldown(t, e, logGate.arrived, "the worker between starting the cooldown and storing it")

	awaitReactivated(t, reactivate(t, e))
	logGate.release()
	assertReactivated(t, e, m)
}

// awaitCooldown waits for the worker to reach a gate (arrived) with the
// account cooling down in the limiter.
func awaitCooldown(t *testing.T, e *env, arrived <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	if lim := e.d.LimitState("acc"); lim.State != wamux.AccountCooldown {
		t.Fatalf("after 131048 the limiter has the account %s, want cooldown", lim.State)
	}
}

// reactivate does what PATCH /v1/accounts/acc {"state":"active"} does:
// store the account active without cooldown_until, in the API's store
// (e.store, which no gate holds), then tell the dispatcher, whose answer
// comes on the channel: it may wait for a cooldown write in flight.
func reactivate(t *testing.T, e *env) <-chan error {
	t.Helper()
	active, zero := wamux.AccountActive, time.Time{}
	a, err := e.store.UpdateAccount(context.Background(), "acc", store.AccountPatch{State: &active, CooldownUntil: &zero})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.d.AccountReactivated(context.Background(), a) }()
	return done
}

func awaitReactivated(t *testing.T, done <-chan error) {
	t.Helper()
	awaitChange(t, done, "the re-activation")
}

// awaitChange waits for the dispatcher's answer to an account change.
func awaitChange(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// assertReactivated checks, once the throttled message m is queued again
// (its worker is done storing the cooldown), that the re-activation won:
// no cooldown in the store (GET shows the account active) nor in the
// limiter, and the account sends at once, before and after a restart on
// the same store.
func assertReactivated(t *testing.T, e *env, m wamux.Message) {
	t.Helper()
	testwait.For(t, "the cooldown write done and the message queued again", 10*time.Second, func() bool {
		return e.status(m.ID) == wamux.StatusQueued && e.d.AttemptsRunning("acc") == 0
	})
	if got, err := e.store.GetAccount(context.Background(), "acc"); err != nil || got.State != wamux.AccountActive || !got.CooldownUntil.IsZero() {
		t.Fatalf("stored account after the re-activation: state %s, cooldown_until %v, err %v; want active without cooldown_until (GET would show cooldown, a restart would pause it)",
			got.State, got.CooldownUntil, err)
	}
	if lim := e.d.LimitState("acc"); lim.State != wamux.AccountActive {
		t.Fatalf("after the re-activation the limiter has the account %s until %v, want active", lim.State, lim.CooldownUntil)
	}
	sendsAtOnce(t, e, "15557809002")

	e.stop()
	e.start()
	if lim := e.d.LimitState("acc"); lim.State != wamux.AccountActive {
		t.Fatalf("after a restart the limiter has the account %s until %v, want active: the operator ended that cooldown", lim.State, lim.CooldownUntil)
	}
	sendsAtOnce(t, e, "15557809003")
}

// sendsAtOnce submits a message from "acc" to a new recipient and waits
// for the provider to accept it; the test clock is frozen, so no pause
// that has not been ended lets it out.
func sendsAtOnce(t *testing.T, e *env, to string) {
	t.Helper()
	m := textMsg(t, admit.Request{AccountID: "acc", To: to})
	e.submit(m)
	testwait.For(t, "a new recipient's message accepted", 10*time.Second, func() bool { return e.status(m.ID) == wamux.StatusAccepted })
}

// patchCooldown does what PATCH /v1/accounts/acc {"state":"cooldown",
// "cooldown_until":until} does: store the account active with that
// cooldown_until, in the API's store (e.store, which no gate holds), then
// hand it to the dispatcher, whose answer comes on the channel: it may
// wait for a cooldown write in flight.
func patchCooldown(t *testing.T, e *env, until time.Time) <-chan error {
	t.Helper()
	active := wamux.AccountActive
	a, err := e.store.UpdateAccount(context.Background(), "acc", store.AccountPatch{State: &active, CooldownUntil: &until})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.d.AccountChanged(context.Background(), a) }()
	return done
}

// assertCooldownKept checks, once the throttled message m is queued again
// (its worker is done storing the cooldown), that the account pauses
// until until: in the store (what GET shows), in the limiter, and after a
// restart on the same store, with the clock past the throttle's own end.
func assertCooldownKept(t *testing.T, e *env, clk *fakeclock.Clock, sp *scriptedProvider, m wamux.Message, until time.Time) {
	t.Helper()
	testwait.For(t, "the cooldown write done and the message queued again", 10*time.Second, func() bool {
		return e.status(m.ID) == wamux.StatusQueued && e.d.AttemptsRunning("acc") == 0
	})
	if a, err := e.store.GetAccount(context.Background(), "acc"); err != nil || !a.CooldownUntil.Equal(until) {
		t.Fatalf("stored cooldown_until %v (err %v), want %v: the limiter pauses until then, GET and a restart must say so",
			a.CooldownUntil, err, until)
	}
	if got := e.d.LimitState("acc"); got.State != wamux.AccountCooldown || !got.CooldownUntil.Equal(until) {
		t.Fatalf("the limiter has the account %s until %v, want cooldown until %v", got.State, got.CooldownUntil, until)
	}
	assertHeld(t, e, sp, "15557805002")

	clk.Advance(cloudapi.SpamCooldown + time.Minute) // the throttle's end is past, until is not
	e.stop()
	e.start()
	if got := e.d.LimitState("acc"); got.State != wamux.AccountCooldown || !got.CooldownUntil.Equal(until) {
		t.Fatalf("after a restart the limiter has the account %s until %v, want cooldown until %v", got.State, got.CooldownUntil, until)
	}
	assertHeld(t, e, sp, "15557805003")
}

// TestCooldownPatchOutlastsCooldownWriteInFlight: the provider throttles
// an account, the worker reads the limiter's cooldown end and its write
// of cooldown_until is on its way to the store when an operator's PATCH
// state=cooldown stores a later end and raises the limiter to it. The
// worker's write landed last: the store held the throttle's shorter end
// while the limiter paused until the operator's, so GET showed the wrong
// end and a restart cut the operator's pause short.
func TestCooldownPatchOutlastsCooldownWriteInFlight(t *testing.T) {
	gate := newCooldownWriteGate()
	e, clk, sp, m := throttledAccount(t, "7805", envOpts{wrapStore: gate.wrap})
	t.Cleanup(gate.release) // runs before the dispatcher's Stop
	awaitCooldown(t, e, gate.arrived, "the cooldown's store write")
	throttleEnd := clk.Now().Add(cloudapi.SpamCooldown)
	if lim := e.d.LimitState("acc"); !lim.CooldownUntil.Equal(throttleEnd) {
		t.Fatalf("the throttle's cooldown ends %v, want %v", lim.CooldownUntil, throttleEnd)
	}

	until := clk.Now().Add(time.Hour)
	changed := patchCooldown(t, e, until)
	testwait.For(t, "the limiter holding the operator's end", 10*time.Second, func() bool {
		return e.d.LimitState("acc").CooldownUntil.Equal(until)
	})
	gate.release()
	awaitChange(t, changed, "the operator's cooldown applied")
	assertCooldownKept(t, e, clk, sp, m, until)
}

// TestCooldownPatchBeforeCooldownWriteBegins: the other order of the same
// race. The limiter has started the throttle's cooldown, the worker has
// not yet read it to store it when the operator's PATCH state=cooldown is
// done: the worker's write must carry the operator's later end, which the
// limiter holds by then, not the throttle's.
func TestCooldownPatchBeforeCooldownWriteBegins(t *testing.T) {
	logGate := newCooldownLogGate()
	e, clk, sp, m := throttledAccount(t, "7806", envOpts{logger: slog.New(logGate)})
	t.Cleanup(logGate.release) // runs before the dispatcher's Stop
	awaitCooldown(t, e, logGate.arrived, "the worker between starting the cooldown and storing it")

	until := clk.Now().Add(time.Hour)
	awaitChange(t, patchCooldown(t, e, until), "the operator's cooldown applied")
	logGate.release()
	assertCooldownKept(t, e, clk, sp, m, until)
}

// TestCooldownPatchShorterThanThrottleKeepsThrottle: an operator's PATCH
// state=cooldown with an end before that of a stored throttle cooldown.
// The limiter never shortens a running cooldown, so the account pauses
// until the throttle's end; the store must say so too, or GET shows the
// operator's end and a restart lets the account send into the throttle.
func TestCooldownPatchShorterThanThrottleKeepsThrottle(t *testing.T) {
	e, clk, sp, m := throttledAccount(t, "7807", envOpts{})
	throttleEnd := clk.Now().Add(cloudapi.SpamCooldown)
	testwait.For(t, "the cooldown stored and the message queued again", 10*time.Second, func() bool {
		a, err := e.store.GetAccount(context.Background(), "acc")
		return err == nil && a.CooldownUntil.Equal(throttleEnd) && e.status(m.ID) == wamux.StatusQueued && e.d.AttemptsRunning("acc") == 0
	})

	awaitChange(t, patchCooldown(t, e, clk.Now().Add(time.Minute)), "the operator's cooldown applied")
	if a, err := e.store.GetAccount(context.Background(), "acc"); err != nil || !a.CooldownUntil.Equal(throttleEnd) {
		t.Fatalf("stored cooldown_until %v (err %v), want the throttle's %v, which the limiter keeps", a.CooldownUntil, err, throttleEnd)
	}
	if got := e.d.LimitState("acc"); got.State != wamux.AccountCooldown || !got.CooldownUntil.Equal(throttleEnd) {
		t.Fatalf("the limiter has the account %s until %v, want cooldown until %v", got.State, got.CooldownUntil, throttleEnd)
	}
	clk.Advance(time.Minute) // the operator's end, not the throttle's
	e.stop()
	e.start()
	if got := e.d.LimitState("acc"); got.State != wamux.AccountCooldown || !got.CooldownUntil.Equal(throttleEnd) {
		t.Fatalf("after a restart the limiter has the account %s until %v, want cooldown until %v", got.State, got.CooldownUntil, throttleEnd)
	}
	assertHeld(t, e, sp, "15557807002")
}
