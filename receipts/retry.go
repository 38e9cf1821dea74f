package receipts

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/wamux/wamux"
)

// Defaults of RetryConfig.
const (
	RetryAttemptsDefault = 5
	RetryBaseDefault     = 50 * time.Millisecond
	RetryMaxDefault      = 2 * time.Second
)

// RetryConfig bounds the retries of a failing store call: Attempts tries
// in all, with full-jitter exponential backoff from Base up to Max.
type RetryConfig struct {
	Attempts int
	Base     time.Duration
	Max      time.Duration
}

func (c *RetryConfig) setDefaults() {
	setDefault(&c.Attempts, RetryAttemptsDefault)
	if c.Base <= 0 {
		c.Base = RetryBaseDefault
	}
	if c.Max <= 0 {
		c.Max = RetryMaxDefault
	}
}

// transient reports whether retrying err may help: infrastructure
// failures may pass, domain errors (invalid, conflict, not found) will not.
func transient(err error) bool {
	c := wamux.ErrorCode(err)
	return c == wamux.EInternal || c == wamux.EUnavailable
}

// retry is the pipeline's one retry loop: it runs fn until it succeeds,
// fails for good, runs out of attempts or ctx ends.
func (p *Pipeline) retry(ctx context.Context, what string, fn func(context.Context) error) error {
	delay := p.cfg.Retry.Base
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil || !transient(err) || attempt >= p.cfg.Retry.Attempts || ctx.Err() != nil {
			return err
		}
		p.c.retries.Add(1)
		p.m.failures.WithLabelValues("store_retry").Inc()
		p.log.Warn("receipts: store call failed; retrying", "doing", what, "attempt", attempt, "err", err)
		t := time.NewTimer(rand.N(delay) + 1)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		delay = min(2*delay, p.cfg.Retry.Max)
	}
}
