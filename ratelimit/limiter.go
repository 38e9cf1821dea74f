package ratelimit

import (
	"context"
	"errors"
	"math"
	"time"
)

// Limiter is the per-account token bucket. Implementations are safe for
// concurrent use and keep one bucket per account id.
//
// An account that was never given a limit uses the implementation's default
// limit (DefaultRate and DefaultBurst for the ones in this package).
type Limiter interface {
	// Reserve takes n tokens from the account's bucket if they are there
	// now and reports ok. Otherwise it takes nothing and reports how long
	// until n tokens will be there at the current rate, so a dispatcher can
	// sleep on a timer instead of polling. n must be in [1, burst]; a larger
	// n could never be granted and is an error (ErrExceedsBurst).
	Reserve(ctx context.Context, accountID string, n int) (ok bool, wait time.Duration, err error)
	// SetLimit changes the account's rate (tokens per second) and burst
	// (bucket size), effective for the very next Reserve. Tokens already in
	// the bucket are kept, capped at the new burst; a larger burst fills
	// up at the new rate rather than at once, so no change of limit ever
	// lets more than rate×T + burst through.
	SetLimit(ctx context.Context, accountID string, rate float64, burst int) error
	// Tokens reports the tokens available now, for the dashboard; an
	// account in debt (Debit) has none.
	Tokens(ctx context.Context, accountID string) (float64, error)
	// Debit charges the account for n messages that used its number's
	// throughput without being sent by us: Meta counts the messages users
	// send to the number against the same per-number limit as ours
	// (reference §3), so each recent inbound message must cost a send. It
	// always succeeds and may leave the bucket below zero, so the next
	// Reserves wait until the debt is refilled. The debt is bounded by
	// MaxDebt of refill (see there). n must be at least 1
	// (ErrInvalidCount); it may exceed the burst.
	Debit(ctx context.Context, accountID string, n int) error
}

// Defaults for an account that was never given a limit: the Cloud API's
// default throughput of 80 messages/s per number, with the burst
// DefaultBurstFor gives it.
const (
	DefaultRate  = 80.0
	DefaultBurst = 2
)

// Headroom is the share of an account's rate a sender leaves unused: it
// paces at PaceRate. The provider counts a message when the request
// arrives, after a network delay that varies from request to request, and
// may count every one-second window: requests that leave evenly spaced
// arrive bunched by that jitter, and the ones over the number's limit in
// some second are refused (130429). At 80/s, 3 % keeps every second at the
// provider within the limit for jitter up to about 30 ms; higher rates
// tolerate more.
const Headroom = 0.03

// PaceRate is the rate an account whose provider limit is rate is sent
// at: rate less the Headroom.
func PaceRate(rate float64) float64 {
	return rate * (1 - Headroom)
}

// DefaultBurstFor is the burst of an account whose provider limit is rate
// when none is given: the Headroom's share of a second, at least 1. A full
// bucket and then one second at PaceRate is at most rate messages, within
// the provider's limit for any second.
func DefaultBurstFor(rate float64) int {
	return max(1, int(math.Floor(rate*Headroom+1e-9)))
}

// MaxDebt bounds how far below zero Debit takes a bucket, as refill time:
// one second of the account's rate. A second is the unit of Meta's
// throughput limit (messages per second), so it holds an inbound burst as
// large as the number's whole per-second budget, the most that can
// matter: beyond it the users alone exceed the number's throughput, which
// no pacing of our sends can prevent (the adaptive layer handles the
// 130429s then). And it caps what a flood of inbound messages, or a
// backlog of webhooks Meta redelivers at once after an outage of our
// endpoint, can cost: the next send waits at most this long beyond the
// refill of its own token, never minutes.
const MaxDebt = time.Second

// Bounds on limits. A rate below MinLimitRate would need an emission
// interval over an hour; bursts above MaxBurst would overflow the time
// arithmetic of the bucket.
const (
	MinLimitRate = 1.0 / 3600
	MaxLimitRate = 1e6
	MaxBurst     = 1_000_000
)

var (
	// ErrInvalidLimit is returned for a rate or burst out of bounds.
	ErrInvalidLimit = errors.New("ratelimit: invalid limit")
	// ErrInvalidCount is returned when Reserve asks for fewer than 1 token.
	ErrInvalidCount = errors.New("ratelimit: token count must be at least 1")
	// ErrExceedsBurst is returned when Reserve asks for more tokens than
	// the bucket holds; such a request could never be granted.
	ErrExceedsBurst = errors.New("ratelimit: token count exceeds burst")
)
