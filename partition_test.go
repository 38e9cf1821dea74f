package wamux

import "testing"

func TestPartitionOfIsStableAndInRange(t *testing.T) {
	// Fixed values: a change of the rule would move accounts between
	// partitions of a running cluster.
	for _, c := range []struct {
		account string
		n, want int
	}{
		{"acct-1", 12, 8},
		{"acct-1", 4, 0},
		{"", 1, 0},
		{"x", 0, 0},
	} {
		if got := PartitionOf(c.account, c.n); got != c.want {
			t.Errorf("PartitionOf(%q, %d) = %d, want %d", c.account, c.n, got, c.want)
		}
	}
	seen := map[int]bool{}
	for i := range 200 {
		p := PartitionOf(string(rune('a'+i%26))+string(rune('0'+i/26)), 8)
		if p < 0 || p >= 8 {
			t.Fatalf("partition %d out of [0,8)", p)
		}
		seen[p] = true
	}
	if len(seen) != 8 {
		t.Errorf("200 accounts fell into %d of 8 partitions", len(seen))
	}
}
