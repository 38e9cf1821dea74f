package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/wamux/wamux/bench"
)

// TestFloodCountsRefusalsAndStoresOnlyAccepted: two clients' first
// batches of 50 already exceed a queue bound of 100 (90 for P1), so items
// are refused with a Retry-After, and the store holds exactly the items
// answered accepted.
func TestFloodCountsRefusalsAndStoresOnlyAccepted(t *testing.T) {
	rep, err := bench.RunFlood(context.Background(), bench.FloodConfig{Clients: 2, Batch: 50,
		Duration: 300 * time.Millisecond, Rate: 1, QueueMaxDepth: 100})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Accepted+rep.Refused+rep.Other != rep.Requests*50 {
		t.Fatalf("%d accepted + %d refused + %d other != %d requests × 50", rep.Accepted, rep.Refused, rep.Other, rep.Requests)
	}
	if rep.Refused < 10 || rep.RefusedByCode["queue_full"] == 0 || rep.RetryAfterMin < 1 {
		t.Fatalf("refused %d (%v), Retry-After from %d s: want queue_full refusals with a Retry-After", rep.Refused,
			rep.RefusedByCode, rep.RetryAfterMin)
	}
	if rep.Stored != int(rep.Accepted) || rep.StoredNotAccept != 0 {
		t.Fatalf("stored %d, accepted %d", rep.Stored, rep.Accepted)
	}
	if rep.QueueDepth["P1"] > 90 {
		t.Fatalf("P1 queue %d over its bound of 90", rep.QueueDepth["P1"])
	}
}
