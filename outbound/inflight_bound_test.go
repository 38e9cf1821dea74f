package outbound_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/outbound"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
)

// slowRoundTrip answers no call before n are waiting: the provider's
// round trip is longer than the time the account's rate takes to start n.
type slowRoundTrip struct {
	base    outbound.Provider
	mu      sync.Mutex
	n       int
	waiting int
	open    chan struct{}
}

func (p *slowRoundTrip) Send(ctx context.Context, dest cloudapi.Destination, msg wamux.Message) cloudapi.Result {
	p.mu.Lock()
	p.waiting++
	if p.waiting == p.n {
		close(p.open)
	}
	p.mu.Unlock()
	select {
	case <-p.open:
	case <-time.After(10 * time.Second): // fewer calls than that in flight: the test fails below
	}
	return p.base.Send(ctx, dest, msg)
}

// TestInflightBoundKeepsUpWithTheRate: an account at the Cloud API's
// highest throughput (1,000/s) whose calls take 100 ms needs 100 of them
// in flight to use its rate. A bound of 64 calls per account would cap it
// at 640/s whatever the rate; before any call is timed the bound assumes
// calls of a second (TestInflightBoundFollowsLatency shows it following
// them).
func TestInflightBoundKeepsUpWithTheRate(t *testing.T) {
	clk := fakeclock.New() // frozen: the burst alone lets all 100 go
	const n = 100
	p := &slowRoundTrip{n: n, open: make(chan struct{})}
	e := newEnv(t, envOpts{clock: clk, simCfg: sim.Config{Clock: clk.Now},
		provider: func(base outbound.Provider) outbound.Provider { p.base = base; return p }})
	e.addAccount("acc", "7501", 1000, n, sim.Limits{Rate: 1000, Burst: n})
	var msgs []wamux.Message
	for i := range n {
		msgs = append(msgs, textMsg(t, admit.Request{AccountID: "acc", To: fmt.Sprintf("1555750%04d", i)}))
	}
	e.submit(msgs...)
	testwait.For(t, fmt.Sprintf("%d calls in flight at once", n), 5*time.Second, func() bool {
		select {
		case <-p.open:
			return true
		default:
			return false
		}
	})
	e.waitAccepted(n, 10*time.Second)
}
