package chaos_test

import (
	"context"
	"flag"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/wamux/wamux/chaos"
)

var (
	rounds   = flag.Int("chaos.rounds", 5, "rounds to run, from seed -chaos.seed on")
	seed     = flag.Uint64("chaos.seed", 0, "the first round's seed; 0 draws one from the clock")
	messages = flag.Int("chaos.messages", 100, "messages per round")
	store    = flag.String("chaos.store", "", "empty for SQLite, or a PostgreSQL URL: each round in a fresh schema there")
)

// TestChaos runs rounds of kill -9, restarts and injected faults against
// `wamux serve` children (built without the race detector: their speed
// decides how much a round covers) and fails with the seed of any round
// that broke an invariant.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs gateways")
	}
	bin := filepath.Join(t.TempDir(), "wamux")
	_, file, _, _ := runtime.Caller(0)
	build := exec.Command("go", "build", "-o", bin, "./cmd/wamux")
	build.Dir = filepath.Dir(filepath.Dir(file))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	first := *seed
	if first == 0 {
		first = uint64(time.Now().UnixNano()) % 1_000_000
	}
	replay := func(s uint64) string {
		cmd := fmt.Sprintf("make chaos SEED=%d ROUNDS=1", s)
		if *store != "" {
			cmd += " STORE=" + *store
		}
		return cmd
	}
	for i := range *rounds {
		s := first + uint64(i)
		t.Logf("chaos: seed=%d", s)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		res, err := chaos.Round(ctx, chaos.Config{Bin: bin, Dir: t.TempDir(), Store: *store, Seed: s, Messages: *messages, Logf: t.Logf})
		cancel()
		if err != nil {
			t.Fatalf("chaos: seed=%d: %v\nreplay: %s", s, err, replay(s))
		}
		t.Logf("chaos: %s", res)
		if len(res.Violations) > 0 {
			for _, v := range res.Violations {
				t.Error(v)
			}
			t.Fatalf("chaos: seed=%d broke %d invariants\nreplay: %s", s, len(res.Violations), replay(s))
		}
	}
}
