package bench

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"
)

func TestWAMIDs(t *testing.T) {
	const n = 50_000
	for _, kind := range []string{WAMIDsRandom, WAMIDsSequential} {
		ids := wamids(kind, n, 7)
		seen := make(map[string]bool, n)
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("%s: %q twice", kind, id)
			}
			seen[id] = true
			if !strings.HasPrefix(id, "wamid.HBgL") {
				t.Fatalf("%s: %q does not look like a wamid", kind, id)
			}
		}
		if !slices.Equal(ids, wamids(kind, n, 7)) {
			t.Fatalf("%s: the same seed gave other ids", kind)
		}
		// Sequential ids sort in sending order; random ones must not, or
		// the benchmark would flatter index inserts again.
		if sorted := slices.IsSorted(ids); sorted != (kind == WAMIDsSequential) {
			t.Fatalf("%s: sorted = %v", kind, sorted)
		}
	}
	// A random id carries a recipient number and a hex id, as real ones.
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(wamids(WAMIDsRandom, 1, 7)[0], "wamid."))
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 3+11+6+18+1 || raw[2] != 11 || raw[1+2+11+5] != 18 {
		t.Fatalf("unexpected layout % x", raw)
	}
	ascending := 0
	ids := wamids(WAMIDsRandom, 1000, 7)
	for i := 1; i < len(ids); i++ {
		if ids[i] > ids[i-1] {
			ascending++
		}
	}
	if ascending < 400 || ascending > 600 {
		t.Fatalf("%d of 999 consecutive random ids ascend; want about half", ascending)
	}
	if _, err := checkWAMIDs("ordered"); err == nil {
		t.Fatal("an unknown --wamids value was accepted")
	}
	if k, err := checkWAMIDs(""); err != nil || k != WAMIDsRandom {
		t.Fatalf(`checkWAMIDs("") = %q, %v`, k, err)
	}
}
