package outbound

import (
	"math"
	"sync"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/ratelimit"
)

// In-flight bounds. An account keeps about rate × latency provider calls
// running to send at its rate (Little's law); it may have inflightHeadroom
// times that, for calls slower than the average, and never fewer than the
// dispatcher's MaxInflight nor more than MaxInflightCap.
const (
	inflightHeadroom = 2.0
	// MaxInflightCap bounds the provider calls of one account whatever
	// its rate and latency: three seconds of the Cloud API's highest
	// throughput (1,000/s). Each is a goroutine and a connection or
	// stream to the provider.
	MaxInflightCap = 3000
	// latencyAssumed is the estimate before any call has been timed.
	latencyAssumed = time.Second
)

// Weights of a new call's duration in the latency estimate: a slower
// provider raises the bound within a few calls, a faster one lowers it
// over a few dozen.
const (
	latencyRiseWeight = 1.0 / 4
	latencyFallWeight = 1.0 / 32
)

// callLatency estimates how long an account's provider calls take: a
// moving average of their durations, weighted towards the recent ones.
// Calls run on their own goroutines, hence the mutex.
type callLatency struct {
	mu   sync.Mutex
	avg  time.Duration
	seen bool
}

// observe adds the duration of one provider call.
func (c *callLatency) observe(d time.Duration) {
	d = max(d, 0)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.seen {
		c.avg, c.seen = d, true
		return
	}
	w := latencyFallWeight
	if d > c.avg {
		w = latencyRiseWeight
	}
	c.avg += time.Duration(w * float64(d-c.avg))
}

// estimate is the current estimate, latencyAssumed before any call.
func (c *callLatency) estimate() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.seen {
		return latencyAssumed
	}
	return c.avg
}

// inflightBound is how many provider calls an account sending at rate
// (messages/s) may have running when a call takes about latency: rate ×
// latency × inflightHeadroom, at least floor, at most MaxInflightCap.
func inflightBound(rate float64, latency time.Duration, floor int) int {
	n := math.Ceil(rate * latency.Seconds() * inflightHeadroom)
	return min(max(floor, int(min(n, MaxInflightCap))), MaxInflightCap)
}

// maxInflight is how many provider calls the account may have running
// now: enough to send at its rate with the calls as slow as they have
// been lately (inflightBound).
func (w *worker) maxInflight(a wamux.Account) int {
	rate, _ := limitFor(a)
	return inflightBound(ratelimit.PaceRate(rate), w.latency.estimate(), w.d.maxIn)
}
