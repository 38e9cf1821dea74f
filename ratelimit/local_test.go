package ratelimit_test

import (
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/ratelimit/ratelimittest"
)

func newLocal(t *testing.T, clock wamux.Clock) ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.NewLocal(ratelimit.LocalConfig{Clock: clock})
	if err != nil {
		t.Fatalf("NewLocal: %v", err)
	}
	return l
}

func TestLocalConformance(t *testing.T) {
	t.Parallel()
	ratelimittest.Run(t, newLocal)
}

// The adaptive layer must not weaken the bound: with no throttles it is
// the wrapped limiter.
func TestAdaptiveConformance(t *testing.T) {
	t.Parallel()
	ratelimittest.Run(t, func(t *testing.T, clock wamux.Clock) ratelimit.Limiter {
		a, err := ratelimit.NewAdaptive(newLocal(t, clock), ratelimit.AdaptiveConfig{Clock: clock})
		if err != nil {
			t.Fatalf("NewAdaptive: %v", err)
		}
		return a
	})
}

func TestLocalDeparturesConformance(t *testing.T) {
	ratelimittest.RunDepartures(t, func(t *testing.T, c wamux.Clock) ratelimit.Departures {
		return ratelimit.NewLocalDepartures(c)
	}, ratelimittest.DeparturesOptions{})
}
