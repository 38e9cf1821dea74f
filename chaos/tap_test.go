package chaos

import (
	"strings"
	"testing"
)

// TestExpectedIsTheMergeOrder: the expectation the round checks statuses
// against is the strongest acknowledged status, whatever the order and
// repeats it came in; of a message sent twice, the strongest status of the
// copy the gateway holds.
func TestExpectedIsTheMergeOrder(t *testing.T) {
	acked := func(ss ...string) []ackedStatus {
		out := make([]ackedStatus, len(ss))
		for i, s := range ss {
			st, wamid, _ := strings.Cut(s, "@")
			out[i] = ackedStatus{st, wamid}
		}
		return out
	}
	tp := &tap{acked: map[string][]ackedStatus{
		"a": acked("sent@w1", "failed@w1"),
		"b": acked("failed@w1", "sent@w1", "delivered@w1"),
		"c": acked("read@w1", "sent@w1", "delivered@w1", "read@w1"),
		"d": acked("sent@w1", "sent@w1"),
		"f": acked("sent@w1", "delivered@w1", "sent@w2", "failed@w2"),
	}}
	for _, c := range []struct{ id, wamid, want string }{
		{"a", "w1", "failed"}, {"b", "w1", "delivered"}, {"c", "w1", "read"}, {"d", "w1", "sent"}, {"e", "", ""},
		{"f", "w2", "failed"}, {"f", "w1", "delivered"}, {"f", "w3", ""}, {"f", "", "delivered"},
	} {
		if got := tp.expected(c.id, c.wamid); got != c.want {
			t.Errorf("%s held as %q: %q, want %q", c.id, c.wamid, got, c.want)
		}
	}
}
