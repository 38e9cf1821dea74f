package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/wamux/wamux/bench"
)

// TestBenchFloodRestart: after a flood, `wamux serve` started on the same
// data becomes ready and queues what the flooded gateway left queued.
func TestBenchFloodRestart(t *testing.T) {
	rep, err := bench.RunFlood(context.Background(), bench.FloodConfig{Clients: 1, Batch: 200,
		Duration: 200 * time.Millisecond, Rate: 0.01, Serve: []string{os.Args[0]}, Env: []string{"WAMUX_TEST_RUN_MAIN=1"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Accepted == 0 || rep.RestartSec <= 0 || rep.RestartRSSMiB <= 0 {
		t.Fatalf("accepted %d, restart %.2fs, RSS %.0f MiB", rep.Accepted, rep.RestartSec, rep.RestartRSSMiB)
	}
	// At 0.01/s with a burst of 1, at most one message left the queue.
	if got := rep.RestartQueued["P1"]; got < int(rep.Accepted)-1 || got > int(rep.Accepted) {
		t.Fatalf("restarted gateway queues %d of %d accepted", got, rep.Accepted)
	}
}
