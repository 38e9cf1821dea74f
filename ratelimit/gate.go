package ratelimit

import (
	"context"
	"fmt"
	"time"
)

// Gate asks both limits a send must pass: the recipient's pair limit and
// the account's bucket.
type Gate struct {
	Accounts Limiter
	Pairs    Pairs
}

// Admission is the answer to "may I send this message now?".
type Admission struct {
	OK bool
	// Wait is how long until asking again makes sense; zero when OK.
	Wait time.Duration
	// PairLimited says the wait is the recipient's alone: the dispatcher
	// should go on with messages to other recipients of the account.
	PairLimited bool
}

// Admit decides one send from accountID to recipient. The pair is checked
// first and charged last, so a refusal by either limit costs the other
// nothing. Admit is meant to be called by the one worker that sends for an
// account; two concurrent Admits for the same pair could both pass the pair
// check (both sends are still recorded, pushing the pair's next send back).
func (g Gate) Admit(ctx context.Context, accountID, recipient string) (Admission, error) {
	w, err := g.Pairs.Wait(ctx, accountID, recipient)
	if err != nil {
		return Admission{}, fmt.Errorf("admit send for %s: %w", accountID, err)
	}
	if w > 0 {
		return Admission{Wait: w, PairLimited: true}, nil
	}
	ok, wait, err := g.Accounts.Reserve(ctx, accountID, 1)
	if err != nil {
		return Admission{}, fmt.Errorf("admit send for %s: %w", accountID, err)
	}
	if !ok {
		return Admission{Wait: wait}, nil
	}
	if err := g.Pairs.Take(ctx, accountID, recipient); err != nil {
		return Admission{}, fmt.Errorf("admit send for %s: %w", accountID, err)
	}
	return Admission{OK: true}, nil
}
