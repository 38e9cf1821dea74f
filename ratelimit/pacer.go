package ratelimit

import (
	"math"
	"sync"
	"time"
)

// Pacer spaces the moments an account's requests leave for the provider.
// The bucket (Limiter) grants a send when it is dispatched; the request
// leaves later, after work whose duration varies (the store write that
// records it as sending), so requests granted evenly can leave bunched.
// A Pacer gives each request, once it is ready to leave, a departure time
// on a schedule of its own: a token bucket of the account's rate and
// burst in which a request books the next token instead of being refused.
// At a constant limit the departures obey the bucket's bound by
// themselves, at most rate×T + burst in any window T, however bunched the
// requests become ready; a request ready after its token leaves at once,
// and the time lost is made up only within the burst.
//
// A change of limit, seen at the next request, keeps the tokens the
// schedule held at the request before, refilled since at the faster of the
// two rates and capped at the new burst: never fewer than the bucket holds
// after the same change (Limiter.SetLimit), whenever it was made, so a
// request the bucket granted waits here for no old limit, provided a
// request came under each limit.
type Pacer struct {
	mu sync.Mutex
	g  gcra // interval zero until the first Reserve
	// last is when the last departure was booked.
	last time.Time
}

// Reserve books the next departure for a request ready at now, for an
// account sending at rate (per second) with burst, and returns when it
// may leave: now or later.
func (p *Pacer) Reserve(now time.Time, rate float64, burst int) time.Time {
	iv := intervalFor(min(max(rate, MinLimitRate), MaxLimitRate))
	burst = min(max(burst, 1), MaxBurst)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.g.interval == 0:
		p.g = gcra{interval: iv, burst: burst}
	case iv != p.g.interval || burst != p.g.burst:
		p.reconfigure(now, iv, burst)
	}
	at := p.g.tat.Add(-time.Duration(p.g.burst-1) * p.g.interval)
	if at.Before(now) {
		at = now
	}
	base := p.g.tat
	if base.Before(at) {
		base = at
	}
	p.g.tat = base.Add(p.g.interval)
	p.last = now
	return at
}

// reconfigure switches the schedule to interval and burst at now (see
// Pacer). A level below zero is departures booked ahead; they stay booked,
// at the new interval. The caller holds mu.
func (p *Pacer) reconfigure(now time.Time, interval time.Duration, burst int) {
	old := p.g
	level := float64(old.burst) - float64(max(old.tat.Sub(p.last), 0))/float64(old.interval)
	level += float64(now.Sub(p.last)) / float64(min(old.interval, interval))
	level = min(level, float64(burst))
	p.g = gcra{interval: interval, burst: burst}
	// Rounded down: the bucket's own rounding must not leave a request
	// it granted a nanosecond to wait here.
	if debt := time.Duration(math.Floor((float64(burst) - level) * float64(interval))); debt > 0 {
		p.g.tat = now.Add(debt)
	}
}
