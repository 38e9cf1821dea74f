package outbound

import (
	"testing"
	"time"
)

// TestBackoffNoOverflow: base<<(n-1) wraps around for large n and can
// land on a positive value below the cap, which is then used as the bound
// of the jitter instead of the cap. With base 50m23.657s, cap 24h (both
// valid settings) and attempt 27 (max_attempts allows 100) the bound
// becomes ~26m25s: every draw stays below it, although the exponential has
// long passed the cap. The bound must be the cap.
func TestBackoffNoOverflow(t *testing.T) {
	base := 50*time.Minute + 23657*time.Millisecond
	ceiling := 24 * time.Hour
	const n = 27
	biggest := time.Duration(0)
	for i := 0; i < 500; i++ {
		biggest = max(biggest, backoff(base, ceiling, n))
	}
	// With the cap as bound, 500 uniform draws in [0, 24h] all below 1h
	// has probability (1/24)^500.
	if biggest < time.Hour {
		t.Fatalf("backoff(%v, %v, %d): largest of 500 draws %v; the bound wrapped around instead of saturating at the cap", base, ceiling, n, biggest)
	}
}
