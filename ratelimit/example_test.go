package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/ratelimit"
)

// A dispatcher's view: one Gate per process, asked before each send.
func ExampleGate() {
	ctx := context.Background()
	clk := fakeclock.New()
	local, _ := ratelimit.NewLocal(ratelimit.LocalConfig{Clock: clk})
	accounts, _ := ratelimit.NewAdaptive(local, ratelimit.AdaptiveConfig{Clock: clk})
	pairs, _ := ratelimit.NewPairLimiter(ratelimit.PairConfig{Clock: clk, Burst: 1})
	gate := ratelimit.Gate{Accounts: accounts, Pairs: pairs}
	_ = accounts.SetLimit(ctx, "acct", 10, 2)

	for _, to := range []string{"+111", "+111", "+222", "+333"} {
		ad, _ := gate.Admit(ctx, "acct", to)
		fmt.Printf("%s ok=%v wait=%v pair=%v\n", to, ad.OK, ad.Wait, ad.PairLimited)
	}

	// The provider answers 130429: the account slows down by 10 %.
	l := accounts.OnThrottled("acct")
	fmt.Println(l.State, l.EffectiveRate)
	// Output:
	// +111 ok=true wait=0s pair=false
	// +111 ok=false wait=6s pair=true
	// +222 ok=true wait=0s pair=false
	// +333 ok=false wait=100ms pair=false
	// active 9
}

func ExampleAdaptive_OnThrottled() {
	clk := fakeclock.New()
	local, _ := ratelimit.NewLocal(ratelimit.LocalConfig{Clock: clk})
	a, _ := ratelimit.NewAdaptive(local, ratelimit.AdaptiveConfig{Clock: clk})
	_ = a.SetLimit(context.Background(), "acct", 80, 8)
	for range 3 { // three throttles, 2 s apart: a cooldown of cooldown_min
		a.OnThrottled("acct")
		clk.Advance(2 * time.Second)
	}
	l := a.Limit("acct")
	fmt.Println(l.State, l.CooldownUntil.Sub(clk.Now()), l.NextCooldown)
	// Output: cooldown 28s 1m0s
}
