package ratelimit_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/ratelimit"
)

// TestPacerSpacesBunchedRequests: requests ready at one instant leave the
// burst at once, then one every 1/rate; one ready after its slot's time
// leaves when it is ready.
func TestPacerSpacesBunchedRequests(t *testing.T) {
	t.Parallel()
	t0 := fakeclock.Epoch
	var p ratelimit.Pacer
	iv := 10 * time.Millisecond // 100/s
	var got []time.Duration
	for range 5 {
		got = append(got, p.Reserve(t0, 100, 2).Sub(t0))
	}
	want := []time.Duration{0, 0, iv, 2 * iv, 3 * iv}
	if !slices.Equal(got, want) {
		t.Fatalf("departures %v, want %v", got, want)
	}
	late := t0.Add(time.Second)
	if at := p.Reserve(late, 100, 2); !at.Equal(late) {
		t.Fatalf("late request leaves at +%v, want at once", at.Sub(late))
	}
}

// TestPacerDeparturesWithinBucketBound: whenever requests become ready,
// none leaves before it is ready, they leave in the order they asked, and
// any window of T holds at most rate×T + burst departures.
func TestPacerDeparturesWithinBucketBound(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		rate := rapid.Float64Range(1, 2000).Draw(t, "rate")
		burst := rapid.IntRange(1, 40).Draw(t, "burst")
		gaps := rapid.SliceOfN(rapid.Int64Range(0, int64(50*time.Millisecond)), 1, 300).Draw(t, "gaps")
		var p ratelimit.Pacer
		now := fakeclock.Epoch
		var deps []time.Time
		for _, g := range gaps {
			now = now.Add(time.Duration(g))
			at := p.Reserve(now, rate, burst)
			if at.Before(now) {
				t.Fatalf("leaves at %v, before it is ready at %v", at, now)
			}
			if n := len(deps); n > 0 && at.Before(deps[n-1]) {
				t.Fatalf("departure %d at %v before the one booked before it at %v", n, at, deps[n-1])
			}
			deps = append(deps, at)
		}
		window := rapid.SampledFrom([]time.Duration{time.Millisecond, 100 * time.Millisecond, time.Second, 3 * time.Second}).Draw(t, "window")
		for i := range deps {
			n := 0
			for j := i; j < len(deps) && deps[j].Sub(deps[i]) < window; j++ {
				n++
			}
			if limit := rate*window.Seconds() + float64(burst); float64(n) > limit {
				t.Fatalf("%d departures within %v from %v, bound %.2f", n, window, deps[i], limit)
			}
		}
	})
}

// TestPacerHoldsNoRequestTheBucketGrantedAtOnce: requests that become ready
// the instant the bucket grants them leave at once, across changes of the
// limit that the bucket takes when told and the Pacer at the next request,
// as long as a request comes under each limit (the Pacer sees no other).
func TestPacerHoldsNoRequestTheBucketGrantedAtOnce(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		clk := fakeclock.New()
		l, err := ratelimit.NewLocal(ratelimit.LocalConfig{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		limit := func(label string) (float64, int) {
			return rapid.Float64Range(1, 2000).Draw(t, label+" rate"), rapid.IntRange(1, 40).Draw(t, label+" burst")
		}
		rate, burst := limit("first")
		if err := l.SetLimit(ctx, "a", rate, burst); err != nil {
			t.Fatal(err)
		}
		var p ratelimit.Pacer
		seen := true // a request came under the current limit
		for step := range rapid.IntRange(1, 200).Draw(t, "steps") {
			if seen && rapid.IntRange(0, 9).Draw(t, "change") == 0 {
				seen = false
				rate, burst = limit("new")
				if err := l.SetLimit(ctx, "a", rate, burst); err != nil {
					t.Fatal(err)
				}
			}
			now := clk.Now()
			for {
				ok, _, err := l.Reserve(ctx, "a", 1)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				seen = true
				if at := p.Reserve(now, rate, burst); !at.Equal(now) {
					t.Fatalf("step %d: granted at once, held %v (rate %v, burst %d)", step, at.Sub(now), rate, burst)
				}
			}
			clk.Advance(time.Duration(rapid.Int64Range(1, int64(100*time.Millisecond)).Draw(t, "advance")))
		}
	})
}
