package bench

import (
	"context"
	"testing"
	"time"
)

// TestOutboundSmoke runs a short measurement and checks the correctness
// figures, which must be exact whatever the machine's speed.
func TestOutboundSmoke(t *testing.T) {
	rep, err := RunOutbound(context.Background(), OutboundConfig{Accounts: 3, Rate: 40, Duration: 2 * time.Second, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Submitted != 3*80 || rep.NotAccepted != 0 || rep.Accepted != int64(rep.Submitted) {
		t.Fatalf("submitted %d, accepted %d, not accepted %d", rep.Submitted, rep.Accepted, rep.NotAccepted)
	}
	if rep.DuplicatesAtProvider != 0 || rep.OrderViolations != 0 || rep.OverLimit != 0 {
		t.Fatalf("duplicates %d, order violations %d, over limit %d", rep.DuplicatesAtProvider, rep.OrderViolations, rep.OverLimit)
	}
	if rep.Utilization <= 0 || rep.Utilization > 1.05 {
		t.Fatalf("utilization %v is not a ratio of the allowed sends", rep.Utilization)
	}
}
