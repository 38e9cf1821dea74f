package outbound_test

import (
	"context"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
)

// TestStateGaugeEndsWithCooldown: an idle account paused by an operator
// (PATCH state=cooldown) shows wamux_account_state{state="cooldown"} 1,
// and 0 again once the pause is over, without any message to send. The
// worker slept until something else woke it (an hour), so the gauge kept
// saying cooldown long after the account was active again.
func TestStateGaugeEndsWithCooldown(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.addAccount("acc", "7401", 100, 10, sim.Limits{Rate: 1000})
	ctx := context.Background()
	active, until := wamux.AccountActive, time.Now().Add(300*time.Millisecond)
	// What PATCH /v1/accounts/acc {"state":"cooldown","cooldown_until":…} stores.
	a, err := e.store.UpdateAccount(ctx, "acc", store.AccountPatch{State: &active, CooldownUntil: &until})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.d.AccountChanged(ctx, a); err != nil {
		t.Fatal(err)
	}
	state := func(st wamux.AccountState) float64 {
		return metric(t, e, "wamux_account_state", map[string]string{"account": "acc", "state": string(st)})
	}
	testwait.For(t, "the cooldown shown", 10*time.Second, func() bool { return state(wamux.AccountCooldown) == 1 })
	testwait.For(t, "the account shown active after its cooldown", 10*time.Second, func() bool {
		return state(wamux.AccountActive) == 1 && state(wamux.AccountCooldown) == 0
	})
}
