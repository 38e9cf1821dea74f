package sim

import (
	"strconv"
	"testing"
	"time"
)

func TestPairStatePruned(t *testing.T) {
	nb := newNumber(Number{PhoneNumberID: "n", AccessToken: "t"}, Limits{PairInterval: time.Second, PairBurst: 1}, Faults{}, 1)
	now := int64(time.Hour)
	for i := range pruneFloor - 1 {
		nb.pairs[strconv.Itoa(i)] = pairState{start: now - 2, tat: now - 1} // idle: limits nothing any more
	}
	nb.pairs["recent"] = pairState{start: now, tat: now + int64(time.Second)}
	nb.maybePruneLocked(now)
	if len(nb.pairs) != 1 {
		t.Fatalf("%d pairs left, want only the recent one", len(nb.pairs))
	}
	if _, ok := nb.pair.allow(nb.pairs["recent"], now); ok {
		t.Fatal("the recent recipient lost its limit")
	}
	if nb.pruneAt != pruneFloor {
		t.Fatalf("pruneAt %d", nb.pruneAt)
	}
}

func TestGCRABound(t *testing.T) {
	// At most burst + T/interval requests conform in any window T.
	g := newGCRA(100*time.Millisecond, 5)
	var tat int64
	n := 0
	for ts := int64(0); ts < int64(time.Second); ts += int64(time.Millisecond) {
		if next, ok := g.allow(tat, ts); ok {
			tat = next
			n++
		}
	}
	if n != 5+9 { // burst, then one per 100 ms over the remaining 999 ms
		t.Fatalf("%d conformed in 1 s, want 14", n)
	}
}

func TestValidVersion(t *testing.T) {
	for v, want := range map[string]bool{
		"v24.0": true, "v3.2": true, "v21": true, "v100.10": true,
		"": false, "v": false, "24.0": false, "v24.": false, "v24.0.1": false, "vx.0": false, "v1234.0": false, "V24.0": false,
	} {
		if got := validVersion(v); got != want {
			t.Errorf("validVersion(%q) = %v, want %v", v, got, want)
		}
	}
}
