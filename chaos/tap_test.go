package chaos

import "testing"

// TestExpectedIsTheMergeOrder: the expectation the round checks statuses
// against is the strongest acknowledged status, whatever the order and
// repeats it came in.
func TestExpectedIsTheMergeOrder(t *testing.T) {
	tp := &tap{acked: map[string][]string{
		"a": {"sent", "failed"},
		"b": {"failed", "sent", "delivered"},
		"c": {"read", "sent", "delivered", "read"},
		"d": {"sent", "sent"},
	}}
	for id, want := range map[string]string{"a": "failed", "b": "delivered", "c": "read", "d": "sent", "e": ""} {
		if got := tp.expected(id); got != want {
			t.Errorf("%s: %q, want %q", id, got, want)
		}
	}
}
