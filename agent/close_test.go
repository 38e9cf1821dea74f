package agent

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// Close racing Reports (and a second Close): no panic, no race, and every
// Report that returned nil is delivered, by this agent or, if Close ran out
// of time, by the next one on the spool. Reports after Close began fail
// with ErrClosed, never silently.
func TestCloseConcurrentWithReport(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	dir := t.TempDir()
	a := newTestAgent(t, g, dir, nil)
	rs := testReceipts("race", 400)
	var (
		mu sync.Mutex
		ok []Receipt
		wg sync.WaitGroup
	)
	started := make(chan struct{})
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < len(rs); i += 8 {
				if i == 80 {
					close(started)
				}
				err := a.Report(context.Background(), rs[i])
				switch {
				case err == nil:
					mu.Lock()
					ok = append(ok, rs[i])
					mu.Unlock()
				case !errors.Is(err, ErrClosed):
					t.Errorf("Report: %v", err)
				}
			}
		})
	}
	<-started
	closed := make(chan error, 2)
	for range 2 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			closed <- a.Close(ctx)
		}()
	}
	wg.Wait()
	e1, e2 := <-closed, <-closed
	if e1 != nil || e2 != nil {
		t.Fatalf("Close = %v and %v, want nil twice", e1, e2)
	}
	if len(ok) == 0 {
		t.Fatal("no Report succeeded before Close")
	}
	b := newTestAgent(t, g, dir, nil)
	closeAgent(t, b)
	g.wantStored(t, ok)
}
