package outbound_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
)

// stepClock moves the fake clock by step n times, letting the account's
// worker do everything due at each instant, and calls each (when not nil)
// before each step with the time elapsed since the first.
func stepClock(t *testing.T, e *env, clk *fakeclock.Clock, acc string, step time.Duration, n int, each func(elapsed time.Duration)) {
	t.Helper()
	start := clk.Now()
	for range n {
		settle(t, e, acc)
		if each != nil {
			each(clk.Now().Sub(start))
		}
		clk.Advance(step)
		e.d.Kick()
	}
	settle(t, e, acc)
}

func submitMany(t *testing.T, e *env, acc string, n int, prefix string) {
	t.Helper()
	var msgs []wamux.Message
	for i := range n {
		msgs = append(msgs, textMsg(t, admit.Request{AccountID: acc, To: fmt.Sprintf("%s%04d", prefix, i)}))
	}
	e.submit(msgs...)
}

// pacedInterval is the time between two sends of an account of the given
// rate_per_sec once its burst is used: it is paced at ratelimit.PaceRate,
// the emission interval rounded up to the nanosecond.
func pacedInterval(rate float64) time.Duration {
	return time.Duration(math.Ceil(float64(time.Second) / ratelimit.PaceRate(rate)))
}

// TestSteadyOverloadUsesTheWholeRate: with more queued than the account's
// rate can send and the provider enforcing the same rate and burst, every
// instant has sent exactly burst + paced rate × elapsed (no token lost to
// rounding or to timers) and the provider never answers 130429.
func TestSteadyOverloadUsesTheWholeRate(t *testing.T) {
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk, simCfg: sim.Config{Clock: clk.Now}})
	e.addAccount("acc", "7001", 20, 4, sim.Limits{Rate: 20, Burst: 4})
	submitMany(t, e, "acc", 200, "1555700")
	iv := pacedInterval(20)
	stepClock(t, e, clk, "acc", 10*time.Millisecond, 500, func(el time.Duration) {
		want := int64(4 + el/iv)
		if got := e.sim.Stats().Totals.Accepted; got != want {
			t.Fatalf("%v into the overload %d accepted, want %d", el, got, want)
		}
	})
	if st := e.sim.Stats().Totals; st.OverLimit != 0 {
		t.Fatalf("the provider answered 130429 %d times", st.OverLimit)
	}
}

// TestThrottleBacksOffAndClimbsBack: one 130429 takes 10 % off the
// account's rate (ratelimit.DefaultDecreaseFactor), which climbs back by 5 %
// of the configured rate a second and is whole again 2 s later
// (ratelimit.DefaultIncreaseStep); from then on the account sends its full
// rate again.
func TestThrottleBacksOffAndClimbsBack(t *testing.T) {
	clk := fakeclock.New()
	_, wrap := newScripted(map[string]cloudapi.Result{
		"15557100000": {Outcome: cloudapi.SlowDown, Code: 130429, Delay: cloudapi.ThroughputDelay, HTTPStatus: 400, Reason: "130429: rate limit hit"},
	})
	e := newEnv(t, envOpts{clock: clk, simCfg: sim.Config{Clock: clk.Now}, provider: wrap})
	e.addAccount("acc", "7101", 20, 4, sim.Limits{Rate: 20, Burst: 4})
	submitMany(t, e, "acc", 400, "1555710")
	var perSec []int64
	last := int64(0)
	stepClock(t, e, clk, "acc", 100*time.Millisecond, 150, func(el time.Duration) {
		if el%time.Second != 0 {
			return
		}
		ratio := e.d.LimitState("acc").EffectiveRate / ratelimit.PaceRate(20)
		if want := min(0.9+0.05*float64(el/time.Second), 1); ratio < want-1e-9 || ratio > want+1e-9 {
			t.Fatalf("%v after the 130429 the effective rate is %.2f of the configured, want %.2f", el, ratio, want)
		}
		got := e.sim.Stats().Totals.Accepted
		perSec = append(perSec, got-last)
		last = got
	})
	// The full paced rate, 19.4/s: 19 or 20 in each second.
	for s := 3; s < len(perSec); s++ {
		if perSec[s] != 19 && perSec[s] != 20 {
			t.Fatalf("accepted per second %v: second %d has %d, want the full 19.4", perSec, s, perSec[s])
		}
	}
	if sum := perSec[3] + perSec[4] + perSec[5] + perSec[6] + perSec[7]; sum < 96 || sum > 97 {
		t.Fatalf("accepted per second %v: %d in seconds 3 to 7, want 5 × 19.4", perSec, sum)
	}
	if st := e.sim.Stats().Totals; st.OverLimit != 0 {
		t.Fatalf("the provider answered 130429 %d times", st.OverLimit)
	}
}

// TestPatchedLimitAppliesToTheNextSend: a PATCH of rate_per_sec and burst
// takes effect at the next send, up and down, keeps the tokens the bucket
// had (no fresh burst), and never lets more than rate × T + burst through.
func TestPatchedLimitAppliesToTheNextSend(t *testing.T) {
	clk := fakeclock.New()
	e := newEnv(t, envOpts{clock: clk, simCfg: sim.Config{Clock: clk.Now}})
	e.addAccount("acc", "7601", 20, 4, sim.Limits{Rate: 40, Burst: 8})
	submitMany(t, e, "acc", 400, "1555760")
	patch := func(rate float64, burst int) {
		a, err := e.store.UpdateAccount(context.Background(), "acc", store.AccountPatch{RatePerSec: &rate, Burst: &burst})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.d.AccountChanged(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	var perSec []int64
	last := int64(0)
	// Each rate here (20, 40, 10/s) earns whole tokens at 25 ms steps.
	stepClock(t, e, clk, "acc", 25*time.Millisecond, 360, func(el time.Duration) {
		switch el {
		case 3 * time.Second:
			patch(40, 8)
		case 6 * time.Second:
			patch(10, 2)
		}
		if el%time.Second == 0 && el > 0 {
			got := e.sim.Stats().Totals.Accepted
			perSec = append(perSec, got-last)
			last = got
		}
	})
	// Second i (1-based) is (i-1 s, i s]; the first holds the burst.
	// Each rate is paced at ratelimit.PaceRate: a second holds that many,
	// give or take the fraction of a token carried from one to the next.
	want := []float64{4 + 20, 20, 20, 40, 40, 40, 10, 10}
	for i, w := range want {
		if i > 0 {
			w = ratelimit.PaceRate(w)
		} else {
			w = 4 + ratelimit.PaceRate(20)
		}
		if got := float64(perSec[i]); got < math.Floor(w) || got > math.Ceil(w) {
			t.Fatalf("accepted per second %v: second %d has %v, want %.1f", perSec, i+1, got, w)
		}
	}
	if st := e.sim.Stats().Totals; st.OverLimit != 0 {
		t.Fatalf("the provider answered 130429 %d times", st.OverLimit)
	}
}
