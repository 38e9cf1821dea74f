package ratelimit_test

import (
	"math"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/ratelimit"
)

func newAdaptive(t *testing.T, clk wamux.Clock, cfg ratelimit.AdaptiveConfig) *ratelimit.Adaptive {
	t.Helper()
	cfg.Clock = clk
	a, err := ratelimit.NewAdaptive(newLocal(t, clk), cfg)
	if err != nil {
		t.Fatalf("NewAdaptive: %v", err)
	}
	return a
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// granted counts the grants of one-token requests made every millisecond
// for d: a measure of the rate the inner bucket really enforces.
func granted(t *testing.T, clk *fakeclock.Clock, l ratelimit.Limiter, acct string, d time.Duration) int {
	t.Helper()
	n := 0
	for end := clk.Now().Add(d); clk.Now().Before(end); clk.Advance(time.Millisecond) {
		ok, _, err := l.Reserve(t.Context(), acct, 1)
		if err != nil {
			t.Fatalf("Reserve: %v", err)
		}
		if ok {
			n++
		}
	}
	return n
}

// TestAdaptiveDecreaseAndClimbBack: by default one throttle costs 10 % of
// the rate, which the bucket enforces at once, and the rate is whole again
// 2 s later.
func TestAdaptiveDecreaseAndClimbBack(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New()
	a := newAdaptive(t, clk, ratelimit.AdaptiveConfig{CooldownAfter: 100})
	if err := a.SetLimit(t.Context(), "a", 100, 10); err != nil {
		t.Fatal(err)
	}
	if l := a.OnThrottled("a"); !near(l.EffectiveRate, 90) || l.State != wamux.AccountActive {
		t.Fatalf("after one throttle: %+v, want effective 90, active", l)
	}
	// The lowered rate is what the bucket enforces: the burst of 10,
	// then 81 grants in 0.9 s, not 90.
	if n := granted(t, clk, a, "a", 900*time.Millisecond); n < 90 || n > 92 {
		t.Fatalf("grants in 0.9 s at 90 %% of 100/s = %d, want about 10 + 81", n)
	}
	// Additive climb: +5/s (5 % of 100) per second, back to 100 after 2 s.
	clk.Advance(100 * time.Millisecond) // 1 s after the throttle
	if l := a.Limit("a"); !near(l.EffectiveRate, 95) {
		t.Fatalf("1 s after the throttle: effective %v, want 95", l.EffectiveRate)
	}
	clk.Advance(time.Second)
	if l := a.Limit("a"); !near(l.EffectiveRate, 100) || !near(l.Rate, 100) {
		t.Fatalf("2 s after the throttle: %+v, want back at 100", l)
	}
	clk.Advance(time.Hour)
	if l := a.Limit("a"); !near(l.EffectiveRate, 100) {
		t.Fatalf("long after: effective %v, want it to stay at the configured 100", l.EffectiveRate)
	}
	if n := granted(t, clk, a, "a", time.Second); n < 109 || n > 111 {
		t.Fatalf("grants in 1 s after the climb = %d, want about 10 + 100", n)
	}
}

func TestAdaptiveDecreaseCompoundsAndFloors(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New()
	a := newAdaptive(t, clk, ratelimit.AdaptiveConfig{CooldownAfter: 100, MinRate: 10, IncreaseStep: 0.001, DecreaseFactor: 0.5})
	if err := a.SetLimit(t.Context(), "a", 80, 1); err != nil {
		t.Fatal(err)
	}
	want := []float64{40, 20, 10, 10, 10}
	for i, w := range want {
		l := a.OnThrottled("a")
		if math.Abs(l.EffectiveRate-w) > 0.5 {
			t.Fatalf("throttle %d: effective %v, want about %v", i+1, l.EffectiveRate, w)
		}
		clk.Advance(2 * time.Second) // past the hold, so each one counts
	}
}

func TestAdaptiveEchoesNotCounted(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New()
	a := newAdaptive(t, clk, ratelimit.AdaptiveConfig{})
	if err := a.SetLimit(t.Context(), "a", 80, 8); err != nil {
		t.Fatal(err)
	}
	// Twenty in-flight sends all come back throttled at once: one event.
	var l ratelimit.AccountLimit
	for range 20 {
		l = a.OnThrottled("a")
		clk.Advance(10 * time.Millisecond)
	}
	if !near(l.EffectiveRate, 72) || l.State != wamux.AccountActive {
		t.Fatalf("after a burst of echoes: %+v, want one step down to 72 and no cooldown", l)
	}
}

func TestAdaptiveCooldownEscalatesAndResets(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clk := fakeclock.New()
	a := newAdaptive(t, clk, ratelimit.AdaptiveConfig{
		CooldownMin: 30 * time.Second, CooldownMax: 2 * time.Minute,
		CooldownAfter: 3, ThrottleWindow: 10 * time.Second, CooldownReset: 5 * time.Minute,
	})
	if err := a.SetLimit(ctx, "a", 80, 8); err != nil {
		t.Fatal(err)
	}

	// Three throttles 2 s apart start the first cooldown, of cooldown_min.
	a.OnThrottled("a")
	clk.Advance(2 * time.Second)
	if l := a.OnThrottled("a"); l.State != wamux.AccountActive {
		t.Fatalf("after 2 throttles: %+v, want still active", l)
	}
	clk.Advance(2 * time.Second)
	start := clk.Now()
	l := a.OnThrottled("a")
	if l.State != wamux.AccountCooldown || !l.CooldownUntil.Equal(start.Add(30*time.Second)) {
		t.Fatalf("after 3 throttles: %+v, want cooldown for 30s", l)
	}

	// During the cooldown: no tokens, the wait is the rest of it, and
	// throttles of sends already in flight do not extend it.
	clk.Advance(10 * time.Second)
	ok, wait, err := a.Reserve(ctx, "a", 1)
	if err != nil || ok || wait != 20*time.Second {
		t.Fatalf("Reserve in cooldown: ok=%v wait=%v err=%v; want refused for 20s", ok, wait, err)
	}
	if tok, err := a.Tokens(ctx, "a"); err != nil || tok != 0 {
		t.Fatalf("Tokens in cooldown = %v, %v; want 0", tok, err)
	}
	if l := a.OnThrottled("a"); !l.CooldownUntil.Equal(start.Add(30 * time.Second)) {
		t.Fatalf("a throttle during the cooldown moved its end to %v", l.CooldownUntil)
	}

	// After it: sends again, at the reduced rate.
	clk.Advance(20 * time.Second)
	if ok, _, err := a.Reserve(ctx, "a", 1); err != nil || !ok {
		t.Fatalf("Reserve after the cooldown: ok=%v err=%v; want granted", ok, err)
	}
	if l := a.Limit("a"); l.State != wamux.AccountActive || l.EffectiveRate >= 80 {
		t.Fatalf("after the cooldown: %+v, want active below the configured rate", l)
	}

	// A throttle soon after the cooldown starts the next one at once,
	// doubled; then doubled again, then capped at cooldown_max.
	for i, want := range []time.Duration{time.Minute, 2 * time.Minute, 2 * time.Minute} {
		clk.Advance(time.Second)
		start := clk.Now()
		l := a.OnThrottled("a")
		if l.State != wamux.AccountCooldown || !l.CooldownUntil.Equal(start.Add(want)) {
			t.Fatalf("repeat %d: %+v, want cooldown for %v", i+1, l, want)
		}
		clk.Advance(want)
	}

	// A quiet period resets the escalation: the next cooldown is the
	// minimum again.
	clk.Advance(5 * time.Minute)
	a.OnThrottled("a")
	clk.Advance(2 * time.Second)
	if l := a.OnThrottled("a"); l.State != wamux.AccountActive {
		t.Fatalf("after a quiet period, 2 throttles: %+v, want active", l)
	}
	clk.Advance(2 * time.Second)
	start = clk.Now()
	if l := a.OnThrottled("a"); !l.CooldownUntil.Equal(start.Add(30 * time.Second)) {
		t.Fatalf("after a quiet period: %+v, want a 30s cooldown again", l)
	}
}

func TestAdaptiveThrottlesFarApartNeverCoolDown(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New()
	a := newAdaptive(t, clk, ratelimit.AdaptiveConfig{ThrottleWindow: 10 * time.Second})
	for range 10 {
		if l := a.OnThrottled("a"); l.State != wamux.AccountActive {
			t.Fatalf("throttles 11 s apart: %+v, want no cooldown", l)
		}
		clk.Advance(11 * time.Second)
	}
}

func TestAdaptiveCoolDownAndSetCooldown(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clk := fakeclock.New()
	a := newAdaptive(t, clk, ratelimit.AdaptiveConfig{})
	until := clk.Now().Add(time.Minute)
	a.CoolDown("a", until)
	a.CoolDown("a", clk.Now().Add(time.Second)) // never shortens
	if _, wait, _ := a.Reserve(ctx, "a", 1); wait != time.Minute {
		t.Fatalf("wait after CoolDown = %v, want 1m", wait)
	}
	if err := a.SetCooldown(10*time.Second, 40*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := a.SetCooldown(10*time.Second, 5*time.Second); err == nil {
		t.Fatal("SetCooldown with max < min accepted")
	}
	clk.Advance(time.Hour)
	for range 3 {
		a.OnThrottled("b")
		clk.Advance(2 * time.Second)
	}
	if l := a.Limit("b"); l.State != wamux.AccountCooldown || !l.CooldownUntil.Equal(clk.Now().Add(8*time.Second)) {
		t.Fatalf("after SetCooldown(10s, 40s): %+v, want a 10s cooldown", l)
	}
}

// TestAdaptiveReportsStartedCooldown: Throttle and CoolDown say whether
// they started a cooldown; a throttle or a provider delay that comes while
// one runs starts none (the caller counts cooldowns by this).
func TestAdaptiveReportsStartedCooldown(t *testing.T) {
	t.Parallel()
	clk := fakeclock.New()
	a := newAdaptive(t, clk, ratelimit.AdaptiveConfig{})
	for i := range 3 {
		l, started := a.Throttle("a")
		if want := i == 2; started != want || (l.State == wamux.AccountCooldown) != want {
			t.Fatalf("throttle %d: started %v, state %s", i+1, started, l.State)
		}
		clk.Advance(2 * time.Second)
	}
	if l, started := a.Throttle("a"); started || l.State != wamux.AccountCooldown {
		t.Fatalf("throttle during the cooldown: started %v, state %s; want false, cooldown", started, l.State)
	}
	if a.CoolDown("a", clk.Now().Add(time.Hour)) {
		t.Fatal("CoolDown during a running cooldown reported a start")
	}
	if !a.CoolDown("b", clk.Now().Add(time.Minute)) {
		t.Fatal("CoolDown of an account not cooling down reported no start")
	}
	if a.CoolDown("c", clk.Now()) {
		t.Fatal("CoolDown ending now reported a start")
	}
}
