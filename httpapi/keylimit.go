package httpapi

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/settings"
)

// keyLimits is one token bucket per API key (by key id): key_rate
// requests per second, key_burst at once. A change of the settings
// applies to every bucket at its next request.
type keyLimits struct {
	clock    wamux.Clock
	settings *settings.Manager // nil: the defaults

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func newKeyLimits(clock wamux.Clock, s *settings.Manager) *keyLimits {
	return &keyLimits{clock: clock, settings: s, buckets: map[string]*rate.Limiter{}}
}

// allow takes one request from the key's bucket; when it is empty it
// returns false and the wait until a request fits.
func (k *keyLimits) allow(keyID string) (bool, time.Duration) {
	v := settings.Defaults()
	if k.settings != nil {
		v = k.settings.Current()
	}
	now := k.clock.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	b, ok := k.buckets[keyID]
	if !ok {
		b = rate.NewLimiter(rate.Limit(v.KeyRate), v.KeyBurst)
		k.buckets[keyID] = b
	}
	if b.Limit() != rate.Limit(v.KeyRate) {
		b.SetLimitAt(now, rate.Limit(v.KeyRate))
	}
	if b.Burst() != v.KeyBurst {
		b.SetBurstAt(now, v.KeyBurst)
	}
	r := b.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// keyLimited is the 429 of a key over its request rate.
func keyLimited(keyID string, wait time.Duration) error {
	// The text names the wait as Retry-After does, in whole seconds
	// rounded up: a wait of a fraction of a millisecond is not "0s".
	secs := (wait + time.Second - 1) / time.Second
	e := wamux.Errorf(wamux.ERateLimited, "API key %s is over its request rate (key_rate, key_burst); retry after %d s", keyID, secs)
	e.RetryAfter = wait
	return e
}
