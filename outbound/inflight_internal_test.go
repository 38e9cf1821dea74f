package outbound

import (
	"testing"
	"time"
)

// TestInflightBoundIsBounded: the bound is twice rate × latency, never
// below the dispatcher's floor (a slow account, a fast provider) nor above
// MaxInflightCap (a provider that stalls for seconds).
func TestInflightBoundIsBounded(t *testing.T) {
	for _, c := range []struct {
		rate    float64
		latency time.Duration
		want    int
	}{
		{970, 1500 * time.Millisecond, 2910},
		{77.6, 400 * time.Millisecond, 64},
		{77.6, time.Second, 156},
		{5, 10 * time.Millisecond, 64},
		{970, 30 * time.Second, MaxInflightCap},
		{970, 0, 64},
	} {
		if got := inflightBound(c.rate, c.latency, 64); got != c.want {
			t.Errorf("inflightBound(%v/s, %v) = %d, want %d", c.rate, c.latency, got, c.want)
		}
	}
}

// TestCallLatencyRisesFastFallsSlowly: the estimate starts at the first
// call's duration, moves a quarter of the way towards a slower call and a
// thirty-second towards a faster one.
func TestCallLatencyRisesFastFallsSlowly(t *testing.T) {
	var c callLatency
	if got := c.estimate(); got != latencyAssumed {
		t.Fatalf("estimate before any call %v, want %v", got, latencyAssumed)
	}
	c.observe(200 * time.Millisecond)
	c.observe(1000 * time.Millisecond)
	if got := c.estimate(); got != 400*time.Millisecond {
		t.Fatalf("after 200 ms and 1 s: %v, want 400ms", got)
	}
	c.observe(80 * time.Millisecond)
	if got := c.estimate(); got != 390*time.Millisecond {
		t.Fatalf("then 80 ms: %v, want 390ms", got)
	}
}
