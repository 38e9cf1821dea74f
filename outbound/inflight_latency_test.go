package outbound_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/outbound"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/sim"
)

// slowProvider accepts every message latency after the call began on the
// test's fake clock: a call stays open until the test moves the clock
// past its end and releases it.
type slowProvider struct {
	clk     *fakeclock.Clock
	latency time.Duration

	mu      sync.Mutex
	open    []chan struct{}
	ends    []time.Time
	began   []time.Time // of every call, in order
	pending int         // calls entered and not released
}

func (p *slowProvider) Send(ctx context.Context, dest cloudapi.Destination, msg wamux.Message) cloudapi.Result {
	ch := make(chan struct{})
	p.mu.Lock()
	now := p.clk.Now()
	p.began = append(p.began, now)
	p.open = append(p.open, ch)
	p.ends = append(p.ends, now.Add(p.latency))
	p.pending++
	p.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return cloudapi.Result{Outcome: cloudapi.Unknown, Reason: "stopped"}
	}
	return cloudapi.Result{Outcome: cloudapi.Accepted, WAMID: "wamid." + msg.ID, HTTPStatus: 200, Code: -1}
}

// release answers the calls whose latency is over at now.
func (p *slowProvider) release(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	keepOpen, keepEnds := p.open[:0], p.ends[:0]
	for i, ch := range p.open {
		if !p.ends[i].After(now) {
			close(ch)
			p.pending--
			continue
		}
		keepOpen, keepEnds = append(keepOpen, ch), append(keepEnds, p.ends[i])
	}
	p.open, p.ends = keepOpen, keepEnds
}

func (p *slowProvider) state() (calls, pending int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.began), p.pending
}

// callsBetween counts the calls that began in [from, to).
func (p *slowProvider) callsBetween(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, b := range p.began {
		if !b.Before(from) && b.Before(to) {
			n++
		}
	}
	return n
}

// TestInflightBoundFollowsLatency: an account of 100/s whose provider
// answers every call 1.5 s after it began needs 150 calls in flight to send
// at its rate. A bound of one second of its rate (100) held it at 2/3 of
// it; the bound follows the calls' measured duration and the account sends
// at its whole paced rate once the first calls have been timed.
func TestInflightBoundFollowsLatency(t *testing.T) {
	clk := fakeclock.New()
	p := &slowProvider{clk: clk, latency: 1500 * time.Millisecond}
	e := newEnv(t, envOpts{clock: clk, simCfg: sim.Config{Clock: clk.Now},
		provider: func(outbound.Provider) outbound.Provider { return p }})
	t.Cleanup(func() { p.release(clk.Now().Add(time.Hour)) }) // before the dispatcher stops
	e.addAccount("acc", "7701", 100, 10, sim.Limits{Rate: 1000})
	submitMany(t, e, "acc", 800, "1555770")
	start := clk.Now()
	// settled: every attempt the worker launched is open at the provider.
	settled := func() bool {
		_, pending := p.state()
		return e.d.AttemptsRunning("acc") == pending
	}
	for range 120 { // 6 s in steps of 50 ms
		for {
			before, _ := p.state()
			e.d.Settle("acc")
			testwait.For(t, "the launched calls at the provider", 10*time.Second, settled)
			e.d.Settle("acc")
			if after, _ := p.state(); after == before && settled() {
				break
			}
		}
		clk.Advance(50 * time.Millisecond)
		p.release(clk.Now())
		testwait.For(t, "the answered calls completed", 10*time.Second, settled)
		e.d.Kick()
	}
	// From 3 s on the bound has seen calls of 1.5 s for a while.
	got := p.callsBetween(start.Add(3*time.Second), start.Add(6*time.Second))
	want := 3 * ratelimit.PaceRate(100)
	if float64(got) < 0.95*want {
		t.Fatalf("calls begun from 3 s to 6 s: %d, want about %.0f (the paced rate)", got, want)
	}
}
