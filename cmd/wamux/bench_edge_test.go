package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/wamux/wamux/bench"
)

// TestBenchEdge: against `wamux serve` children, slow webhook bodies with a
// wrong signature are read to their end and refused 401 (never taken), and
// with more connections than max_connections every one is still answered
// (idle ones are closed to make room) while at most the cap stay open.
func TestBenchEdge(t *testing.T) {
	const conns, maxConns = 150, 40
	rep, err := bench.RunEdge(context.Background(), bench.EdgeConfig{Serve: []string{os.Args[0]}, Env: []string{"WAMUX_TEST_RUN_MAIN=1"},
		Idle: 200 * time.Millisecond, ProbeEvery: 50 * time.Millisecond,
		SlowConns: 4, BodyBytes: 64 << 10, BodyRate: 1 << 20, SlowDuration: 1500 * time.Millisecond,
		IdleConns: conns, IdleHold: 300 * time.Millisecond, MaxConnections: maxConns})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.SlowBody
	if s.Answers[401] == 0 || len(s.Answers) != 1 || s.PeakRSSMiB <= 0 || s.Probes.N == 0 {
		t.Errorf("slow bodies: answers %v, peak RSS %.0f MiB, %d probes; want only 401s, a peak RSS and probes", s.Answers, s.PeakRSSMiB, s.Probes.N)
	}
	if len(rep.Conns) != 1 {
		t.Fatalf("%d connection phases, want 1", len(rep.Conns))
	}
	c := rep.Conns[0]
	if c.Held+c.Closed != conns || c.OpenAtEnd > maxConns {
		t.Errorf("connections: %d held, %d closed, %d unanswered, %d not accepted, %d open at the end; want all %d answered and at most %d open",
			c.Held, c.Closed, c.Unanswered, c.DialFailed, c.OpenAtEnd, conns, maxConns)
	}
}
