package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/wamux/wamux/store"
)

// Config is what both implementations need.
type Config struct {
	// Store keeps the partitions' epochs; required.
	Store store.FenceStore
	// Node names this node in the store's leases; the host name when
	// empty.
	Node string
	// Partitions is how many partitions accounts are spread over: the
	// stream's partitions in a cluster; PartitionsEmbedded when 0 for
	// Embedded. Required for Cluster.
	Partitions int
	Logger     *slog.Logger
}

// PartitionsEmbedded is Embedded's default number of partitions: one
// node holds them all, so one lease fences everything.
const PartitionsEmbedded = 1

func (c *Config) prepare(what string, partitions int) error {
	if c.Store == nil {
		return fmt.Errorf("ownership: %s needs a store", what)
	}
	if c.Partitions == 0 {
		c.Partitions = partitions
	}
	if c.Partitions < 1 {
		return fmt.Errorf("ownership: %s needs at least one partition, got %d", what, c.Partitions)
	}
	if c.Node == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			return fmt.Errorf("ownership: %s needs a node id (no host name to default to: %v)", what, err)
		}
		c.Node = host
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Cluster is the ownership of a cluster node: it holds the partitions the
// stream's consumer group assigned to it. Assign acquires them in the
// store, which fences their previous holder; Revoke drops them here only
// (the next holder's acquisition fences this node's leases).
type Cluster struct {
	*table
	cfg Config
	// op serialises Assign and Revoke, so their acquisitions and changes
	// happen in the order they were called.
	op sync.Mutex
}

var _ Ownership = (*Cluster)(nil)

// NewCluster returns a Cluster holding no partition. Close it after use.
func NewCluster(cfg Config) (*Cluster, error) {
	if err := cfg.prepare("cluster", 0); err != nil {
		return nil, err
	}
	return &Cluster{table: newTable(cfg.Partitions), cfg: cfg}, nil
}

// Assign acquires the partitions in the store and holds them, and returns
// once watchers have been told. A partition held already keeps its lease.
// One that cannot be acquired is not held, and the error names it; the
// others are.
func (c *Cluster) Assign(ctx context.Context, partitions []int) error {
	c.op.Lock()
	defer c.op.Unlock()
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if closing {
		return errClosed
	}
	leases, err := acquire(ctx, c.table, c.cfg, partitions)
	c.mu.Lock()
	told := c.change(leases, nil)
	c.mu.Unlock()
	<-told
	return err
}

// Revoke drops the partitions and returns once watchers have been told.
func (c *Cluster) Revoke(partitions []int) {
	c.op.Lock()
	defer c.op.Unlock()
	var in []int
	for _, p := range partitions {
		if p >= 0 && p < c.n {
			in = append(in, p)
		}
	}
	c.mu.Lock()
	told := c.change(nil, in)
	c.mu.Unlock()
	<-told
}

// Close tells watchers what is queued and stops telling them. The leases
// stay as they are.
func (c *Cluster) Close() error {
	c.table.close()
	return nil
}

// acquire takes the partitions t does not hold yet in cfg's store.
func acquire(ctx context.Context, t *table, cfg Config, partitions []int) ([]Lease, error) {
	var leases []Lease
	var errs []error
	for _, p := range partitions {
		if p < 0 || p >= t.n {
			errs = append(errs, fmt.Errorf("ownership: partition %d is not one of 0..%d", p, t.n-1))
			continue
		}
		if t.isHeld(p) || containsPartition(leases, p) {
			continue
		}
		epoch, err := cfg.Store.AcquirePartition(ctx, p, cfg.Node)
		if err != nil {
			errs = append(errs, fmt.Errorf("ownership: acquire partition %d: %w", p, err))
			continue
		}
		leases = append(leases, Lease{Partition: p, Epoch: epoch})
	}
	if len(leases) > 0 {
		cfg.Logger.Info("partitions acquired", "node", cfg.Node, "leases", leases)
	}
	return leases, errors.Join(errs...)
}

func containsPartition(ls []Lease, p int) bool {
	for _, l := range ls {
		if l.Partition == p {
			return true
		}
	}
	return false
}
