package agent

import (
	"slices"
	"sync"
	"testing"
	"time"
)

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	const base, limit = 100 * time.Millisecond, time.Second
	for _, tc := range []struct {
		n    int
		rnd  float64
		want time.Duration
	}{
		{0, 0, 0},
		{0, 0.5, 50 * time.Millisecond},
		{1, 0.5, 100 * time.Millisecond},
		{3, 0.5, 400 * time.Millisecond},
		{4, 0.5, 500 * time.Millisecond}, // 1.6 s capped to 1 s
		{4, 0.999, 999 * time.Millisecond},
		{1000, 0.5, 500 * time.Millisecond}, // no overflow however long it goes on
	} {
		if got := backoffDelay(base, limit, tc.n, tc.rnd); got != tc.want {
			t.Errorf("backoffDelay(n=%d, rnd=%v) = %s, want %s", tc.n, tc.rnd, got, tc.want)
		}
	}
}

// recordingClock fires every After at once and remembers what was asked,
// so the test sees the backoff schedule without waiting for it.
type recordingClock struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (c *recordingClock) Now() time.Time { return time.Unix(1_764_000_000, 0) }

func (c *recordingClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.delays = append(c.delays, d)
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

// scriptedBackoff runs an agent whose gateway answers script before it
// accepts, with the backoff base and cap given and a clock that records
// every wait instead of sleeping. It checks that the receipts were stored
// and that each of the len(script) waits was drawn from [0, min(base·2ⁿ,
// limit)), and returns the agent and the waits.
func scriptedBackoff(t *testing.T, name string, script []gwMode, base, limit time.Duration) (*Agent, []time.Duration) {
	t.Helper()
	g := newGateway(t)
	g.setMode(gwOK, script...)
	clock := &recordingClock{}
	a := newTestAgent(t, g, t.TempDir(), func(c *Config) {
		c.BackoffBase, c.BackoffCap, c.Clock = base, limit, clock
	})
	rs := testReceipts(name, 3)
	reportAll(t, a, rs)
	closeAgent(t, a)
	g.wantStored(t, rs)

	clock.mu.Lock()
	delays := clock.delays
	clock.mu.Unlock()
	if len(delays) != len(script) {
		t.Fatalf("%d backoff waits, want %d", len(delays), len(script))
	}
	for n, d := range delays {
		if ceil := min(base<<n, limit); d < 0 || d >= ceil {
			t.Errorf("wait %d = %s, want in [0, %s)", n, d, ceil)
		}
	}
	return a, delays
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	t.Parallel()
	const fails = 16
	const base, limit = 10 * time.Millisecond, 80 * time.Millisecond
	script := make([]gwMode, fails)
	for i := range script {
		script[i] = gwFail
	}
	a, delays := scriptedBackoff(t, "backoff", script, base, limit)
	var late time.Duration
	for n, d := range delays {
		if n >= 4 {
			late = max(late, d)
		}
	}
	// Twelve waits drawn from [0, 80 ms): that none exceeds 20 ms has
	// probability 4⁻¹², so this shows the schedule grew past its start.
	if late <= 2*base {
		t.Errorf("late waits all at most %s: the backoff did not grow (%v)", late, delays)
	}
	if st := a.Stats(); st.Retries != fails {
		t.Errorf("Retries = %d, want %d", st.Retries, fails)
	}
}

// 429 is retried, not dead-lettered, and its Retry-After is honoured up to
// BackoffCap.
func TestTooManyRequestsHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	g.setMode(gwOK, gwThrottle, gwThrottle)
	clock := &recordingClock{}
	a := newTestAgent(t, g, t.TempDir(), func(c *Config) {
		c.BackoffBase, c.BackoffCap, c.Clock = time.Millisecond, 5*time.Second, clock
	})
	rs := testReceipts("throttle", 4)
	reportAll(t, a, rs)
	closeAgent(t, a)
	g.wantStored(t, rs)
	clock.mu.Lock()
	defer clock.mu.Unlock()
	if want := []time.Duration{5 * time.Second, 5 * time.Second}; !slices.Equal(clock.delays, want) {
		t.Errorf("waits = %v, want %v (Retry-After 7 s capped at 5 s)", clock.delays, want)
	}
	if st := a.Stats(); st.Retries != 2 || st.DeadLettered != 0 {
		t.Errorf("Stats = %+v, want 2 retries, nothing dead-lettered", st)
	}
}
