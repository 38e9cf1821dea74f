package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/httpapi"
)

// orderedPipeline is the send pipeline's account side, recording every
// account change it is told of in order. The change whose rate is
// gateRate waits in AccountChanged until gate is closed, after closing
// entered.
type orderedPipeline struct {
	countingPipelines
	gateRate float64
	entered  chan struct{}
	gate     chan struct{}

	mu    sync.Mutex
	rates []float64
}

func (p *orderedPipeline) AccountChanged(_ context.Context, a wamux.Account) error {
	if a.RatePerSec == p.gateRate {
		close(p.entered)
		<-p.gate
	}
	p.mu.Lock()
	p.rates = append(p.rates, a.RatePerSec)
	p.mu.Unlock()
	return nil
}

func (p *orderedPipeline) told() []float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]float64(nil), p.rates...)
}

// TestConcurrentPatchesReachThePipelineInStoreOrder: two PATCHes of one
// account store their changes one after the other, and the send pipeline
// must be told of them in that order, or it ends up running on the older
// one while the store and GET show the newer (a rate, or a state=active
// undone by a rate-only PATCH that read the cooldown before it). Here the
// first PATCH's news to the pipeline is held; the second must wait for it
// before it writes, so the pipeline hears rate 10 and then 20, and 20 is
// what both the store and the pipeline end with.
func TestConcurrentPatchesReachThePipelineInStoreOrder(t *testing.T) {
	st, _, log := openAccountStore(t)
	pipe := &orderedPipeline{gateRate: 10, entered: make(chan struct{}), gate: make(chan struct{})}
	api, err := httpapi.New(httpapi.Config{Store: st, Registry: prometheus.NewRegistry(), APIKeys: []string{testKey},
		Logger: log, Outbound: pipe})
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan string, 2)
	restore := httpapi.SetAccountLockWait(func(id string) { waiting <- id })
	defer restore()
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	srv := ts.URL

	patch := func(body string, done chan<- int) {
		req, err := http.NewRequest("PATCH", srv+"/v1/accounts/acc1", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			done <- 0
			return
		}
		req.Header.Set("Authorization", "Bearer "+testKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			done <- 0
			return
		}
		res.Body.Close()
		done <- res.StatusCode
	}
	first, second := make(chan int, 1), make(chan int, 1)
	go patch(`{"rate_per_sec":10}`, first)
	<-pipe.entered
	go patch(`{"rate_per_sec":20}`, second)
	select {
	case id := <-waiting:
		if id != "acc1" {
			t.Fatalf("a PATCH waited for account %q, want acc1", id)
		}
	case <-time.After(10 * time.Second):
		close(pipe.gate)
		<-first
		<-second
		t.Fatalf("the second PATCH did not wait for the first one's change to reach the pipeline; the pipeline was told %v", pipe.told())
	}
	close(pipe.gate)
	if c1, c2 := <-first, <-second; c1 != 200 || c2 != 200 {
		t.Fatalf("PATCHes answered %d and %d, want 200", c1, c2)
	}
	if got := pipe.told(); len(got) != 2 || got[0] != 10 || got[1] != 20 {
		t.Fatalf("the pipeline was told rates %v, want [10 20] (the store's order)", got)
	}
	a, err := st.GetAccount(context.Background(), "acc1")
	if err != nil || a.RatePerSec != 20 {
		t.Fatalf("stored account %+v, %v; want rate 20", a, err)
	}
}
