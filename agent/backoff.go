package agent

import "time"

// backoffDelay is the wait before retry attempt n (0 for the first retry):
// "full jitter", uniformly random in [0, min(limit, base·2ⁿ)), with rnd in
// [0, 1). Full jitter spreads the agents of many accounts apart after a
// gateway outage instead of having them return in lockstep.
func backoffDelay(base, limit time.Duration, n int, rnd float64) time.Duration {
	ceil := base
	for i := 0; i < n && ceil < limit; i++ {
		ceil *= 2
	}
	ceil = min(ceil, limit)
	return time.Duration(rnd * float64(ceil))
}
