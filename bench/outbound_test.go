package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux/store/postgres"
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

// Runs on one PostgreSQL database follow each other: each works in a
// schema of its own (the accounts of the first would refuse the second's
// with 409 otherwise), dropped when it ends.
func TestOutboundTwiceOnPostgres(t *testing.T) {
	dsn := os.Getenv("WAMUX_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("WAMUX_TEST_POSTGRES not set")
	}
	for i := 0; i < 2; i++ {
		rep, err := RunOutbound(t.Context(), OutboundConfig{Accounts: 2, Rate: 20, Duration: time.Second, Seed: 3, Store: dsn})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if rep.Accepted != int64(rep.Submitted) || rep.DuplicatesAtProvider != 0 || rep.OrderViolations != 0 {
			t.Fatalf("run %d: submitted %d, accepted %d, duplicates %d, order violations %d", i, rep.Submitted, rep.Accepted,
				rep.DuplicatesAtProvider, rep.OrderViolations)
		}
	}
	h, err := Start(t.Context(), HarnessConfig{Store: dsn})
	if err != nil {
		t.Fatal(err)
	}
	var schema string
	pool := h.App.Store().(*postgres.Store).Pool()
	if err := pool.QueryRow(t.Context(), "SELECT current_schema()").Scan(&schema); err != nil {
		h.Close()
		t.Fatal(err)
	}
	h.Close()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var left bool
	if err := conn.QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(schema, "wamux_bench_") || left {
		t.Fatalf("the run's schema %q (want wamux_bench_…) is left after Close: %v", schema, left)
	}
}
