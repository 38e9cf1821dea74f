package bench

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestRunEventsSmall runs the events benchmark at a small size: every
// message.status event the subscribed rounds and the ceiling wrote reaches
// the receiver, once, signed, and the report's figures agree with each
// other (not how fast they are).
func TestRunEventsSmall(t *testing.T) {
	rep, err := RunEvents(context.Background(), EventsConfig{Messages: 60, Rounds: 2, Ceiling: 200, Batch: 20, Callers: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rounds) != 2 || rep.Rounds[0].Subscribed || !rep.Rounds[1].Subscribed {
		t.Fatalf("rounds %+v: want one without the subscription, then one with it", rep.Rounds)
	}
	for i, r := range rep.Rounds {
		// Each message moves sent → delivered → read unless two of its
		// receipts merge into one change: 1 to 3 events per message.
		if r.Receipts != 180 || r.Events < 60 || r.Events > 180 || r.ReceiptsPerSec <= 0 {
			t.Fatalf("round %d: %+v", i, r)
		}
	}
	sub := rep.Rounds[1]
	if rep.Written != sub.Events || rep.Delivered != rep.Written || sub.Delivered != sub.Events || rep.Missing != 0 {
		t.Fatalf("written %d, delivered %d, missing %d; round %+v", rep.Written, rep.Delivered, rep.Missing, sub)
	}
	if rep.Duplicates != 0 || rep.BadSignatures != 0 {
		t.Fatalf("%d duplicates, %d bad signatures", rep.Duplicates, rep.BadSignatures)
	}
	if rep.EventsPerSec <= 0 || rep.LatencyP50Ms <= 0 || rep.LatencyP99Ms < rep.LatencyP50Ms {
		t.Fatalf("events/s %v, p50 %v ms, p99 %v ms", rep.EventsPerSec, rep.LatencyP50Ms, rep.LatencyP99Ms)
	}
	if rep.ReceiptsPerSecWith != sub.ReceiptsPerSec || rep.ReceiptsPerSecWithout != rep.Rounds[0].ReceiptsPerSec ||
		rep.Ratio != rep.ReceiptsPerSecWith/rep.ReceiptsPerSecWithout {
		t.Fatalf("with %v, without %v, ratio %v; rounds %+v", rep.ReceiptsPerSecWith, rep.ReceiptsPerSecWithout, rep.Ratio, rep.Rounds)
	}
	if rep.CeilingEvents != 200 || rep.CeilingMissing != 0 || rep.CeilingSec <= 0 ||
		rep.CeilingEventsPerSec != float64(rep.CeilingEvents)/rep.CeilingSec {
		t.Fatalf("ceiling: %d events, %d missing, %v s, %v events/s", rep.CeilingEvents, rep.CeilingMissing, rep.CeilingSec,
			rep.CeilingEventsPerSec)
	}
}

// TestEventsConfigRounds: the alternation needs an even number of rounds.
func TestEventsConfigRounds(t *testing.T) {
	for _, n := range []int{1, 3, -2} {
		c := EventsConfig{Rounds: n}
		if err := c.setDefaults(); err == nil {
			t.Errorf("%d rounds accepted", n)
		}
	}
	c := EventsConfig{}
	if err := c.setDefaults(); err != nil || c.Rounds != 6 || c.Messages != 2000 {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
}

// TestRunEventsPostgres: on PostgreSQL, in a schema of its own that is
// dropped afterwards, every event written is delivered.
func TestRunEventsPostgres(t *testing.T) {
	url := os.Getenv("WAMUX_TEST_POSTGRES")
	if url == "" {
		t.Skip("WAMUX_TEST_POSTGRES not set")
	}
	rep, err := RunEvents(context.Background(), EventsConfig{Messages: 30, Rounds: 2, Ceiling: 50, Batch: 10, Callers: 2,
		Store: url, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Store != "postgres" || rep.Written == 0 || rep.Delivered != rep.Written || rep.Missing != 0 ||
		rep.CeilingEvents != 50 || rep.CeilingMissing != 0 {
		t.Fatalf("report %+v", rep)
	}
}
