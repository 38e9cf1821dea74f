package bench

import (
	"context"
	"runtime"
	"testing"
)

// TestRunWebhookSmall: both handlers answer every signed POST 200, and
// every status the real handler took is merged in the end, with the POSTs
// split unevenly into rounds.
func TestRunWebhookSmall(t *testing.T) {
	rep, err := RunWebhook(context.Background(), WebhookConfig{Posts: 300, Statuses: 2, Concurrency: 8, Rounds: 7})
	if err != nil {
		t.Fatal(err)
	}
	if rep.PostsPerSec <= 0 || rep.BarePostsPerSec <= 0 || rep.Ratio <= 0 {
		t.Fatalf("rates not measured: %+v", rep)
	}
	if runtime.GOOS == "linux" && (rep.CPUMicrosPerPost <= 0 || rep.BareCPUMicrosPerPost <= 0) {
		t.Fatalf("CPU per POST not measured: %+v", rep)
	}
	if rep.Rounds != 7 {
		t.Fatalf("rounds = %d, want 7", rep.Rounds)
	}
	if rep.Processed != 600 {
		t.Fatalf("processed %d statuses, want 600", rep.Processed)
	}
}
