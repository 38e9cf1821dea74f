package outbound

import (
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/settings"
)

func TestAccountBoundsTakeTheTighterOfCountAndBacklog(t *testing.T) {
	s := settings.Defaults()
	s.QueueMaxDepth, s.QueueMaxBacklog, s.QueueMemoryMiB = 1000, time.Minute, 9
	// 5/s drains 300 in a minute: tighter than 1,000.
	if b := accountBounds(s, 5); b.depth != 300 || b.reason != refusedBacklog {
		t.Fatalf("at 5/s: %+v, want depth 300 by backlog", b)
	}
	// 100/s drains 6,000 in a minute: the count bound holds.
	if b := accountBounds(s, 100); b.depth != 1000 || b.reason != refusedDepth {
		t.Fatalf("at 100/s: %+v, want depth 1000 by depth", b)
	}
	// A rate too slow to drain one message in the window still queues one.
	if b := accountBounds(s, 1.0/3600); b.depth != 1 {
		t.Fatalf("at 1/h: depth %d, want 1", b.depth)
	}
	if b := accountBounds(s, 5); b.global != 9<<20/MessageBytesEstimate {
		t.Fatalf("global = %d, want %d", b.global, 9<<20/MessageBytesEstimate)
	}
}

func TestP0KeepsAReservedShare(t *testing.T) {
	for _, c := range []struct {
		limit int
		p     wamux.Priority
		want  int
	}{{100, wamux.P0, 100}, {100, wamux.P1, 90}, {100, wamux.P2, 90}, {10, wamux.P1, 9}, {5, wamux.P1, 5}} {
		if got := limitOf(c.limit, c.p); got != c.want {
			t.Errorf("limitOf(%d, %s) = %d, want %d", c.limit, c.p, got, c.want)
		}
	}
}

func TestRetryAfterIsTheDrainTimeOfTheExcess(t *testing.T) {
	for _, c := range []struct {
		excess int
		rate   float64
		want   time.Duration
	}{{10, 5, 2 * time.Second}, {11, 5, 3 * time.Second}, {1, 80, time.Second}, {1, 1.0 / 3600, time.Hour}} {
		if got := retryAfter(c.excess, c.rate); got != c.want {
			t.Errorf("retryAfter(%d, %g) = %s, want %s", c.excess, c.rate, got, c.want)
		}
	}
}

func TestRefusalCarriesCodeAndWait(t *testing.T) {
	err := queueFull("acc", refusedBacklog, 10, 5)
	if wamux.ErrorCode(err) != wamux.EQueueFull || wamux.RetryAfter(err) != 2*time.Second {
		t.Fatalf("code %q, wait %s", wamux.ErrorCode(err), wamux.RetryAfter(err))
	}
}
