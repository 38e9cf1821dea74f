package outbound_test

import (
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
)

// settle waits until the account's worker has nothing more to do at the
// current (fake) time: no attempt running, and a further pass of its loop
// sends nothing new.
func settle(t *testing.T, e *env, acc string) {
	t.Helper()
	for range 100 {
		before := e.sim.Stats().Totals.Requests
		e.d.Settle(acc)
		testwait.For(t, "the attempts done", 10*time.Second, func() bool { return e.d.AttemptsRunning(acc) == 0 })
		e.d.Settle(acc)
		if e.d.AttemptsRunning(acc) == 0 && e.sim.Stats().Totals.Requests == before {
			return
		}
	}
	t.Fatal("the worker kept sending at one instant")
}

// TestPairBurstRespectsMetaBorrowing: with the default pair policy (6 s,
// bursts of 3) against a provider that enforces Meta's pair rule (bursts
// borrow future quota), six messages to one recipient go out as a burst of
// three and, 18 s later, three more, without a single 131056. A token
// bucket sent the 4th at 6 s, which Meta refuses.
func TestPairBurstRespectsMetaBorrowing(t *testing.T) {
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk, simCfg: sim.Config{Clock: clk.Now},
		settings: map[string]string{"pair_interval": "6s", "pair_burst": "3"}})
	e.addAccount("acc", "4021", 100, 10, sim.Limits{Rate: 1000, PairInterval: 6 * time.Second, PairBurst: 3})
	to := "15556670001"
	var msgs []wamux.Message
	for range 6 {
		msgs = append(msgs, textMsg(t, admit.Request{AccountID: "acc", To: to}))
	}
	e.submit(msgs...)
	start := clk.Now()
	for sec := 0; sec <= 40; sec++ {
		settle(t, e, "acc")
		clk.Advance(time.Second)
		e.d.Kick()
	}
	settle(t, e, "acc")
	if n := e.sim.Stats().Totals.PairOverLimit; n != 0 {
		t.Fatalf("the provider answered 131056 %d times", n)
	}
	var at []time.Duration
	for _, m := range e.sim.Messages("4021", to) {
		at = append(at, m.AcceptedAt.Sub(start).Truncate(time.Second))
	}
	want := []time.Duration{0, 0, 0, 18 * time.Second, 18 * time.Second, 18 * time.Second}
	if len(at) != len(want) {
		t.Fatalf("accepted at %v, want %v", at, want)
	}
	for i := range want {
		if at[i] != want[i] {
			t.Fatalf("accepted at %v, want %v", at, want)
		}
	}
}
