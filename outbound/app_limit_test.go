package outbound_test

import (
	"context"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/sim"
)

// addAccountWithToken is addAccount with a chosen access token, so that
// several accounts can share one (numbers of one Meta app).
func (e *env) addAccountWithToken(id, pnid, token string) wamux.Account {
	e.t.Helper()
	if err := e.sim.AddNumber(sim.Number{PhoneNumberID: pnid, AccessToken: token,
		Limits: sim.Limits{Rate: 1000, PairInterval: time.Millisecond, PairBurst: 1000}}); err != nil {
		e.t.Fatal(err)
	}
	a, err := e.store.CreateAccount(context.Background(), wamux.Account{ID: id, PhoneNumberID: pnid, AccessToken: token,
		BaseURL: e.simURL, RatePerSec: 100, Burst: 10, State: wamux.AccountActive})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.d.AccountChanged(context.Background(), a); err != nil {
		e.t.Fatal(err)
	}
	return a
}

// TestAppRateLimitPausesEveryAccountOfTheApp: code 4 is the Graph API's
// application-wide call limit (reference §2: "back off the whole app").
// Accounts sending with the same access token belong to the same app, so
// one code 4 pauses all of them, in the limiter and in the store (a
// restart keeps it); an account with another token is left alone.
func TestAppRateLimitPausesEveryAccountOfTheApp(t *testing.T) {
	clk := fakeclock.New()
	to := "15556400001"
	sp, wrap := newScripted(map[string]cloudapi.Result{
		to: {Outcome: cloudapi.SlowDown, Code: 4, Delay: cloudapi.AppLimitDelay, HTTPStatus: 400, Reason: "4: Application request limit reached"},
	})
	e := newEnv(t, envOpts{clock: clk, provider: wrap})
	e.addAccountWithToken("app1-a", "6401", "token-app1")
	e.addAccountWithToken("app1-b", "6402", "token-app1")
	e.addAccountWithToken("app2-c", "6403", "token-app2")
	m := textMsg(t, admit.Request{AccountID: "app1-a", To: to})
	e.submit(m)
	testwait.For(t, "the code 4 handled", 10*time.Second, func() bool {
		return sp.callsTo(to) == 1 && e.status(m.ID) == wamux.StatusQueued
	})
	want := clk.Now().Add(cloudapi.AppLimitDelay)
	for _, id := range []string{"app1-a", "app1-b"} {
		lim := e.d.LimitState(id)
		if lim.State != wamux.AccountCooldown || lim.CooldownUntil.Before(want) {
			t.Fatalf("after code 4 on app1-a, %s (same token) is %s until %v; want paused until at least %v",
				id, lim.State, lim.CooldownUntil, want)
		}
		a, err := e.store.GetAccount(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if a.CooldownUntil.Before(want) {
			t.Fatalf("stored cooldown_until of %s = %v; want at least %v, so that a restart keeps the pause", id, a.CooldownUntil, want)
		}
	}
	if lim := e.d.LimitState("app2-c"); lim.State != wamux.AccountActive {
		t.Fatalf("app2-c (another token, another app) is %s until %v; want active", lim.State, lim.CooldownUntil)
	}
}

// TestNewRecipientQueuedWhileEveryAccountCoolsDown: a cooldown is the
// gateway pacing itself, not an account out of service. When every
// account is cooling down (one account after a spam limit here; every
// account of an app after a code 4), a new recipient's message is still
// taken and queued on the account whose cooldown ends first, not refused
// as if no account could ever send it.
func TestNewRecipientQueuedWhileEveryAccountCoolsDown(t *testing.T) {
	clk := fakeclock.New()
	first := "15556600001"
	sp, wrap := newScripted(map[string]cloudapi.Result{
		first: {Outcome: cloudapi.Cooldown, Code: 131048, Delay: cloudapi.SpamCooldown, HTTPStatus: 400, Reason: "131048: spam rate limit"},
	})
	e := newEnv(t, envOpts{clock: clk, provider: wrap})
	e.addAccountWithToken("only", "6601", "token-only")
	m := textMsg(t, admit.Request{AccountID: "only", To: first})
	e.submit(m)
	testwait.For(t, "the cooldown", 10*time.Second, func() bool {
		return sp.callsTo(first) == 1 && e.status(m.ID) == wamux.StatusQueued && e.d.LimitState("only").State == wamux.AccountCooldown
	})
	res, err := e.d.Submit(context.Background(), []wamux.Message{textMsg(t, admit.Request{To: "15556600002"})})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[0].Message.AccountID != "only" {
		t.Fatalf("new recipient during the cooldown: account %q, error %v; want queued on the cooling account", res[0].Message.AccountID, res[0].Err)
	}
}

// TestAppRateLimitShowsInEveryAccountsStateGauge: an idle account of the
// app that a code 4 paused shows it in wamux_account_state at once, as
// the API and the dashboard (read from the limiter) do. Its worker had
// nothing to do and was not woken, so the gauge kept saying active for
// the whole pause.
func TestAppRateLimitShowsInEveryAccountsStateGauge(t *testing.T) {
	clk := fakeclock.New()
	to := "15556400011"
	sp, wrap := newScripted(map[string]cloudapi.Result{
		to: {Outcome: cloudapi.SlowDown, Code: 4, Delay: cloudapi.AppLimitDelay, HTTPStatus: 400, Reason: "4: Application request limit reached"},
	})
	e := newEnv(t, envOpts{clock: clk, provider: wrap})
	e.addAccountWithToken("app1-a", "6411", "token-app1")
	e.addAccountWithToken("app1-b", "6412", "token-app1")
	m := textMsg(t, admit.Request{AccountID: "app1-a", To: to})
	e.submit(m)
	testwait.For(t, "the code 4 handled", 10*time.Second, func() bool {
		return sp.callsTo(to) == 1 && e.status(m.ID) == wamux.StatusQueued
	})
	if lim := e.d.LimitState("app1-b"); lim.State != wamux.AccountCooldown {
		t.Fatalf("app1-b is %s in the limiter; want cooldown", lim.State)
	}
	for _, id := range []string{"app1-a", "app1-b"} {
		testwait.For(t, id+" cooling down in wamux_account_state", 5*time.Second, func() bool {
			return metric(t, e, "wamux_account_state", map[string]string{"account": id, "state": "cooldown"}) == 1 &&
				metric(t, e, "wamux_account_state", map[string]string{"account": id, "state": "active"}) == 0
		})
	}
}

// TestAppRateLimitSharedWithOtherNodes: in a cluster the accounts of one
// app are held by several nodes, which learn of each other's code 4 only
// through the shared AppPause. A code 4 here is written there, for the
// app's key; and an account here whose app another node paused sends
// nothing until the pause ends, then sends.
func TestAppRateLimitSharedWithOtherNodes(t *testing.T) {
	clk := fakeclock.New()
	limited := "15556400021"
	sp, wrap := newScripted(map[string]cloudapi.Result{
		limited: {Outcome: cloudapi.SlowDown, Code: 4, Delay: cloudapi.AppLimitDelay, HTTPStatus: 400, Reason: "4: Application request limit reached"},
	})
	shared := ratelimit.NewLocalAppPause(clk)
	e := newEnv(t, envOpts{clock: clk, provider: wrap, appPause: shared})
	a := e.addAccountWithToken("app1-a", "6421", "token-app1")
	b := e.addAccountWithToken("app2-b", "6422", "token-app2")

	m := textMsg(t, admit.Request{AccountID: a.ID, To: limited})
	e.submit(m)
	testwait.For(t, "the code 4 handled", 10*time.Second, func() bool {
		return sp.callsTo(limited) == 1 && e.status(m.ID) == wamux.StatusQueued
	})
	want := clk.Now().Add(cloudapi.AppLimitDelay)
	got, err := shared.PausedUntil(context.Background(), ratelimit.AppKey(a.AccessToken, e.simURL))
	if err != nil {
		t.Fatal(err)
	}
	if got.Before(want) {
		t.Fatalf("shared pause of app1 after its code 4 ends at %v; want at least %v", got, want)
	}

	// Another node's code 4 on app2, which b sends for.
	until := clk.Now().Add(20 * time.Second)
	if _, err := shared.Pause(context.Background(), ratelimit.AppKey(b.AccessToken, e.simURL), until); err != nil {
		t.Fatal(err)
	}
	to := "15556400022"
	mb := textMsg(t, admit.Request{AccountID: b.ID, To: to})
	e.submit(mb)
	testwait.For(t, "app2-b cooling down for its app", 10*time.Second, func() bool {
		lim := e.d.LimitState(b.ID)
		return lim.State == wamux.AccountCooldown && !lim.CooldownUntil.Before(until)
	})
	if n := sp.callsTo(to); n != 0 {
		t.Fatalf("app2-b sent %d times while another node had its app paused", n)
	}
	clk.Advance(21 * time.Second)
	e.d.Kick()
	testwait.For(t, "app2-b's message accepted once the pause ended", 10*time.Second, func() bool {
		return e.status(mb.ID) == wamux.StatusAccepted
	})
	if n := sp.callsTo(to); n != 1 {
		t.Fatalf("app2-b's message took %d provider calls; want 1", n)
	}
}
