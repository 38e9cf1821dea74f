package outbound

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/wamux/wamux"
)

// usable reports whether an account can take new recipients now: active in
// the store and not cooling down in the limiter.
func (d *Dispatcher) usable(a wamux.Account) bool {
	if a.State != wamux.AccountActive {
		return false
	}
	return d.limiter.Limit(a.ID).State == wamux.AccountActive
}

// route returns the account that sends to a recipient. A recipient keeps
// its owner (sticky: one conversation, one business number); a recipient
// without one, or whose owner is disabled or cooling down, gets the pool
// account with the most tokens relative to its capacity (when every active
// account is cooling down, the one whose cooldown ends first), and the
// choice is recorded with its reason.
//
// planned counts the messages already given to each account earlier in the
// same batch: they take tokens as soon as they reach the worker, so they
// are counted against the account now.
func (d *Dispatcher) route(ctx context.Context, to string, planned map[string]int) (string, error) {
	d.routeMu.Lock()
	defer d.routeMu.Unlock()
	owner, err := d.store.GetOwner(ctx, to)
	switch code := wamux.ErrorCode(err); {
	case err == nil:
	case code == wamux.ENotFound:
		owner = ""
	default:
		return "", fmt.Errorf("outbound: owner of recipient: %w", err)
	}
	d.mu.Lock()
	pool := make([]wamux.Account, 0, len(d.accounts))
	for _, a := range d.accounts {
		pool = append(pool, a)
	}
	current, hasOwner := d.accounts[owner]
	d.mu.Unlock()
	if hasOwner && d.usable(current) {
		return owner, nil
	}

	type candidate struct {
		id    string
		ratio float64
	}
	var cands []candidate
	for _, a := range pool {
		if !d.usable(a) {
			continue
		}
		tokens, _ := d.limiter.Tokens(ctx, a.ID)
		cands = append(cands, candidate{a.ID, (tokens - float64(planned[a.ID])) / float64(max(a.Burst, 1))})
	}
	var pick string
	switch {
	case len(cands) > 0:
		sort.Slice(cands, func(i, j int) bool {
			if cands[i].ratio != cands[j].ratio {
				return cands[i].ratio > cands[j].ratio
			}
			return cands[i].id < cands[j].id
		})
		pick = cands[0].id
	case owner != "":
		// Nobody better: keep the owner; its queue holds the message
		// until the account is back.
		return owner, nil
	default:
		if pick = d.firstBackFromCooldown(pool); pick == "" {
			return "", wamux.Errorf(wamux.EUnavailable, "no active account to send from; create one or re-enable one")
		}
	}
	reason := "first"
	if owner != "" {
		reason = "owner_unavailable"
	}
	if err := d.store.SetOwner(ctx, to, pick, reason); err != nil {
		return "", fmt.Errorf("outbound: record owner: %w", err)
	}
	d.metrics.reroutes.WithLabelValues(reason).Inc()
	return pick, nil
}

// firstBackFromCooldown is the active account whose cooldown ends first,
// or "" when none is active. Every account cooling down at once (all of an
// app's after a code 4, or the only one after repeated 429s) is the
// gateway pacing itself: a new recipient's message is queued there, as an
// owned recipient's is, rather than refused.
func (d *Dispatcher) firstBackFromCooldown(pool []wamux.Account) string {
	var pick string
	var end time.Time
	for _, a := range pool {
		if a.State != wamux.AccountActive {
			continue
		}
		until := d.limiter.Limit(a.ID).CooldownUntil
		if pick == "" || until.Before(end) || (until.Equal(end) && a.ID < pick) {
			pick, end = a.ID, until
		}
	}
	return pick
}
