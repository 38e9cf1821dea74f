package sim

import "time"

// pairBurstWindow is how long one burst to a recipient may last: Meta
// allows "up to 45 messages in 6 seconds" (reference §3).
const pairBurstWindow = int64(6 * time.Second)

// pairLimit is Meta's pair rate limit (reference §3): one message per
// interval to one recipient, and bursts of up to burst messages within
// pairBurstWindow that "borrow" future quota. Each message adds one
// interval of debt; a recipient with no debt may start a burst, and once
// the burst's window has passed nothing more goes through until the debt
// is repaid (a burst of 20 means 20 × 6 s = 2 min before the next
// message). A token bucket of size burst would not do: it lets a pair
// burst, pause and burst again, which Meta answers with 131056.
type pairLimit struct {
	interval int64
	burst    int64
}

// pairState is one recipient's: when its current burst started and when
// its debt is repaid (the theoretical arrival time).
type pairState struct {
	start, tat int64
}

func newPairLimit(interval time.Duration, burst int) pairLimit {
	return pairLimit{interval: max(int64(interval), 1), burst: int64(max(burst, 1))}
}

// allow reports whether a message at now conforms and returns the state to
// store if it does (a refused message changes nothing).
func (p pairLimit) allow(s pairState, now int64) (pairState, bool) {
	if s.tat <= now {
		return pairState{start: now, tat: now + p.interval}, true
	}
	if now-s.start < pairBurstWindow && s.tat-s.start < p.burst*p.interval {
		s.tat += p.interval
		return s, true
	}
	return s, false
}

// idle reports whether a stored state no longer constrains anything, so
// the recipient can be forgotten.
func (p pairLimit) idle(s pairState, now int64) bool { return s.tat <= now }
