package ratelimit_test

import (
	"testing"
	"time"

	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/ratelimit"
)

func TestGateChargesOnlyWhenBothAllow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clk := fakeclock.New()
	acc := newLocal(t, clk)
	if err := acc.SetLimit(ctx, "a", 1, 1); err != nil {
		t.Fatal(err)
	}
	g := ratelimit.Gate{Accounts: acc, Pairs: newPairs(t, clk, 6*time.Second, 1)}

	if ad, err := g.Admit(ctx, "a", "r1"); err != nil || !ad.OK {
		t.Fatalf("first Admit = %+v, %v; want OK", ad, err)
	}
	// r1 is pair-limited: the refusal is the pair's, and costs the account
	// nothing.
	clk.Advance(time.Second)
	ad, err := g.Admit(ctx, "a", "r1")
	if err != nil || ad.OK || !ad.PairLimited || ad.Wait != 5*time.Second {
		t.Fatalf("Admit to a paced pair = %+v, %v; want pair-limited for 5s", ad, err)
	}
	if tok, _ := acc.Tokens(ctx, "a"); tok != 1 {
		t.Fatalf("account tokens after a pair refusal = %v, want 1 (not charged)", tok)
	}
	// r2 takes the account's token; r3 is refused by the account, and its
	// pair is not charged.
	if ad, err := g.Admit(ctx, "a", "r2"); err != nil || !ad.OK {
		t.Fatalf("Admit to r2 = %+v, %v; want OK", ad, err)
	}
	ad, err = g.Admit(ctx, "a", "r3")
	if err != nil || ad.OK || ad.PairLimited || ad.Wait != time.Second {
		t.Fatalf("Admit to r3 with an empty account = %+v, %v; want account wait 1s", ad, err)
	}
	if w, err := g.Pairs.Wait(ctx, "a", "r3"); err != nil || w != 0 {
		t.Fatalf("r3's pair wait after an account refusal = %v, want 0 (not charged), err %v", w, err)
	}
}
