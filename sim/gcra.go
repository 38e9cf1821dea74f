package sim

import "time"

// gcra is a generic cell rate limiter for the per-number throughput: one
// int64 (the theoretical arrival time) instead of a token count and a
// timestamp. It allows burst requests at once and then one per interval,
// i.e. at most burst + T/interval in any window T — the same bound as a
// token bucket of that rate and burst. (The pair limit, whose bursts
// borrow future quota, is pairLimit.) Callers hold the lock.
type gcra struct {
	interval int64 // ns between requests at the sustained rate
	tau      int64 // how far ahead of now the TAT may run: (burst-1)·interval
}

func newGCRA(interval time.Duration, burst int) gcra {
	if interval <= 0 {
		interval = 1
	}
	return gcra{interval: int64(interval), tau: int64(interval) * int64(max(burst, 1)-1)}
}

// allow reports whether a request at now conforms, and returns the new TAT
// to store if it does (the old one stays when it does not, so rejected
// requests do not push the limit further away).
func (g gcra) allow(tat, now int64) (int64, bool) {
	if tat < now {
		tat = now
	}
	if tat-now > g.tau {
		return 0, false
	}
	return tat + g.interval, true
}
