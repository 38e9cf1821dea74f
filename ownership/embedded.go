package ownership

import (
	"context"
	"fmt"

	"github.com/wamux/wamux/store"
)

// Embedded is the ownership of the single gateway that claimed its whole
// store (store.Owner): it acquires every partition at start, so its
// message updates carry a valid fence like a cluster node's, and drops
// them all when the claim is lost.
type Embedded struct {
	*table
	cfg  Config
	stop context.CancelFunc
	done chan struct{}
}

var _ Ownership = (*Embedded)(nil)

// NewEmbedded acquires every partition (Config.Partitions,
// PartitionsEmbedded when 0) and holds them until claim is lost; a nil
// claim (a store that cannot be claimed) is never lost. Close it after
// use.
func NewEmbedded(ctx context.Context, cfg Config, claim store.Claim) (*Embedded, error) {
	if err := cfg.prepare("embedded", PartitionsEmbedded); err != nil {
		return nil, err
	}
	t := newTable(cfg.Partitions)
	all := make([]int, cfg.Partitions)
	for p := range all {
		all[p] = p
	}
	leases, err := acquire(ctx, t, cfg, all)
	if err != nil {
		t.close()
		return nil, fmt.Errorf("ownership: embedded: %w", err)
	}
	t.mu.Lock()
	t.change(leases, nil)
	t.mu.Unlock()
	e := &Embedded{table: t, cfg: cfg, done: make(chan struct{})}
	var watchCtx context.Context
	watchCtx, e.stop = context.WithCancel(context.Background())
	var lost <-chan struct{}
	if claim != nil {
		lost = claim.Lost()
	}
	go e.watchClaim(watchCtx, lost, claim, all)
	return e, nil
}

// watchClaim drops every partition when the claim is lost.
func (e *Embedded) watchClaim(ctx context.Context, lost <-chan struct{}, claim store.Claim, all []int) {
	defer close(e.done)
	select {
	case <-ctx.Done():
		return
	case <-lost:
	}
	e.cfg.Logger.Error("store claim lost; this node holds no partition any more", "node", e.cfg.Node, "err", claim.Err())
	e.mu.Lock()
	told := e.change(nil, all)
	e.mu.Unlock()
	<-told
}

// Close stops watching the claim, tells watchers what is queued and stops
// telling them. The leases stay as they are.
func (e *Embedded) Close() error {
	e.stop()
	<-e.done
	e.table.close()
	return nil
}
