package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wamux/wamux/stream"
)

// member is one Consume call: a group member with its own client.
type member struct {
	l  *Log
	h  stream.Handler
	cl *kgo.Client
}

// Consume implements stream.Log. Each poll's records are delivered as
// one batch per partition, the partitions concurrently; rebalances wait
// until the poll's batches returned.
func (l *Log) Consume(ctx context.Context, h stream.Handler) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return stream.ErrClosed
	}
	l.consumers.Add(1)
	l.mu.Unlock()
	defer l.consumers.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-l.closing:
			cancel()
		case <-ctx.Done():
		}
	}()

	m := &member{l: l, h: h}
	cl, err := kgo.NewClient(m.opts()...)
	if err != nil {
		return fmt.Errorf("stream/kafka: consumer: %w", err)
	}
	m.cl = cl
	err = m.run(ctx)
	m.leave()
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("stream/kafka: consume: %w", err)
	}
	return nil
}

func (m *member) opts() []kgo.Opt {
	c := m.l.cfg
	opts := append(slices.Clone(c.ClientOpts),
		kgo.SeedBrokers(c.Brokers...),
		kgo.ConsumerGroup(c.Group),
		kgo.ConsumeTopics(c.Topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.BlockRebalanceOnPoll(),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(m.assigned),
		kgo.OnPartitionsRevoked(m.revoked),
		kgo.OnPartitionsLost(m.revoked),
	)
	if c.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(c.SessionTimeout))
	}
	if c.HeartbeatInterval > 0 {
		opts = append(opts, kgo.HeartbeatInterval(c.HeartbeatInterval))
	}
	if c.RebalanceTimeout > 0 {
		opts = append(opts, kgo.RebalanceTimeout(c.RebalanceTimeout))
	}
	return opts
}

// run polls and delivers until ctx ends or a batch fails.
func (m *member) run(ctx context.Context) error {
	for {
		fetches := m.cl.PollRecords(ctx, m.l.cfg.MaxPollRecords)
		if ctx.Err() != nil {
			m.cl.AllowRebalance()
			return ctx.Err()
		}
		if err := fetchErr(fetches); err != nil {
			m.cl.AllowRebalance()
			return err
		}
		err := m.deliver(ctx, fetches)
		m.cl.AllowRebalance()
		if err != nil {
			return err
		}
	}
}

// fetchErr is the first error of a poll; franz-go retries what it can,
// so what reaches the poll ends the member.
func fetchErr(fs kgo.Fetches) error {
	for _, e := range fs.Errors() {
		return fmt.Errorf("fetch %s partition %d: %w", e.Topic, e.Partition, e.Err)
	}
	return nil
}

// deliver hands each partition's records of one poll to the handler, the
// partitions concurrently, and returns the first error.
func (m *member) deliver(ctx context.Context, fs kgo.Fetches) error {
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
	)
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		rs := make([]stream.Record, len(p.Records))
		for i, r := range p.Records {
			rs[i] = stream.Record{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: r.Value}
		}
		wg.Go(func() {
			if err := m.h.Batch(ctx, p.Partition, rs); err != nil {
				errMu.Lock()
				first = cmp.Or(first, err)
				errMu.Unlock()
			}
		})
	})
	wg.Wait()
	return first
}

// leave leaves the group, which revokes the member's partitions through
// the revoke hook, and closes the client.
func (m *member) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), m.l.cfg.LeaveTimeout)
	defer cancel()
	if err := m.cl.LeaveGroupContext(ctx); err != nil && !errors.Is(err, context.Canceled) {
		// The group then expires the member after its session timeout;
		// its partitions were revoked locally either way.
		m.revokeAll(ctx)
	}
	m.cl.Close()
}

// assigned records the member as the partitions' holder, then tells the
// handler.
func (m *member) assigned(ctx context.Context, _ *kgo.Client, a map[string][]int32) {
	ps := sorted(a[m.l.cfg.Topic])
	if len(ps) == 0 {
		return
	}
	m.l.ownMu.Lock()
	for _, p := range ps {
		m.l.owners[p] = m
	}
	m.l.ownMu.Unlock()
	m.h.Assigned(ctx, ps)
}

// revoked tells the handler, then releases the partitions; franz-go
// calls it once the poll's batches returned, and before any other member
// can be assigned them. Lost partitions take the same path, though
// commits then fail.
func (m *member) revoked(ctx context.Context, _ *kgo.Client, r map[string][]int32) {
	ps := sorted(r[m.l.cfg.Topic])
	if len(ps) == 0 {
		return
	}
	m.h.Revoked(ctx, ps)
	m.l.ownMu.Lock()
	for _, p := range ps {
		if m.l.owners[p] == m {
			delete(m.l.owners, p)
		}
	}
	m.l.ownMu.Unlock()
}

// revokeAll revokes whatever the member still holds, when leaving the
// group failed.
func (m *member) revokeAll(ctx context.Context) {
	m.l.ownMu.RLock()
	var ps []int32
	for p, o := range m.l.owners {
		if o == m {
			ps = append(ps, p)
		}
	}
	m.l.ownMu.RUnlock()
	m.revoked(ctx, nil, map[string][]int32{m.l.cfg.Topic: ps})
}

func sorted(ps []int32) []int32 {
	ps = slices.Clone(ps)
	slices.Sort(ps)
	return ps
}
