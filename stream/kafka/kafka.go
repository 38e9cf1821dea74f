// Package kafka is the cluster stream.Log: a Kafka topic whose partition
// is wamux.PartitionOf(account), produced with acks from all in-sync
// replicas, and consumed by a consumer group so that each partition (so
// each account) is processed by one node at a time.
//
// Appends go through one idempotent producer with a manual partitioner,
// so Kafka's partition is ours and a retried produce is not stored twice.
// Each Consume call is one group member with a client of its own. It
// uses the cooperative-sticky balancer: a member joining or leaving moves
// only the partitions that must move, while the others keep being
// processed (an eager balancer would revoke every partition of every
// node at each change). Rebalances wait for the batches in flight
// (BlockRebalanceOnPoll), offsets are committed only by Commit, and
// Commit holds the partition's ownership so that it never lands after
// the partition was handed on.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wamux/wamux"
	"github.com/wamux/wamux/stream"
)

const (
	// PartitionsDefault is the partition count of a topic Open creates.
	PartitionsDefault = 16
	// MaxPollRecordsDefault caps the records of one poll, so of the
	// batches a rebalance may have to wait for.
	MaxPollRecordsDefault = 1024
	// LeaveTimeoutDefault bounds leaving the group when Consume ends.
	LeaveTimeoutDefault = 30 * time.Second
)

// Config configures a Log.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// Topic is the stream's topic; Open creates it if missing.
	Topic string
	// Group is the consumer group of every Consume.
	Group string
	// Partitions is the topic's partition count: used to create it, and
	// checked against an existing topic (another count would move
	// accounts between partitions).
	Partitions int
	// ReplicationFactor of a created topic; 0 or -1: the broker default.
	ReplicationFactor int16
	// MaxPollRecords caps the records delivered by one poll.
	MaxPollRecords int
	// SessionTimeout, HeartbeatInterval and RebalanceTimeout are the
	// group's; zero keeps franz-go's defaults (45 s, 3 s, 60 s). A
	// member learns of a rebalance at its next heartbeat.
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	RebalanceTimeout  time.Duration
	// LeaveTimeout bounds leaving the group when Consume ends.
	LeaveTimeout time.Duration
	// ClientOpts are added to every client (TLS, SASL, logging).
	ClientOpts []kgo.Opt
}

func (c *Config) setDefaults() error {
	if len(c.Brokers) == 0 || c.Topic == "" || c.Group == "" {
		return wamux.Errorf(wamux.EInvalid, "stream/kafka: brokers, topic and group are required")
	}
	if c.Partitions <= 0 {
		c.Partitions = PartitionsDefault
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = -1
	}
	if c.MaxPollRecords <= 0 {
		c.MaxPollRecords = MaxPollRecordsDefault
	}
	if c.LeaveTimeout <= 0 {
		c.LeaveTimeout = LeaveTimeoutDefault
	}
	return nil
}

// Log is the Kafka stream.Log. It is safe for concurrent use.
type Log struct {
	cfg  Config
	prod *kgo.Client

	mu        sync.Mutex
	closed    bool
	closing   chan struct{} // closed by Close: Consume calls return
	consumers sync.WaitGroup

	// ownMu guards owners, the member holding each partition; Commit
	// holds it for reading, so a partition is released only once the
	// commits under way returned.
	ownMu  sync.RWMutex
	owners map[int32]*member
}

var _ stream.Log = (*Log)(nil)

// Open connects the producer and creates the topic if it is missing.
func Open(ctx context.Context, cfg Config) (*Log, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	opts := append(slices.Clone(cfg.ClientOpts),
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent: franz-go's default with all acks
	)
	prod, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("stream/kafka: producer: %w", err)
	}
	l := &Log{cfg: cfg, prod: prod, closing: make(chan struct{}), owners: map[int32]*member{}}
	if err := l.ensureTopic(ctx); err != nil {
		prod.Close()
		return nil, err
	}
	return l, nil
}

// ensureTopic creates the topic, or checks the partition count of the
// one that exists.
func (l *Log) ensureTopic(ctx context.Context) error {
	adm := kadm.NewClient(l.prod)
	_, err := adm.CreateTopic(ctx, int32(l.cfg.Partitions), l.cfg.ReplicationFactor, nil, l.cfg.Topic)
	if err == nil {
		return nil
	}
	if !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("stream/kafka: create topic %s: %w", l.cfg.Topic, err)
	}
	ts, err := adm.ListTopics(ctx, l.cfg.Topic)
	if err != nil {
		return fmt.Errorf("stream/kafka: describe topic %s: %w", l.cfg.Topic, err)
	}
	d := ts[l.cfg.Topic]
	if d.Err != nil {
		return fmt.Errorf("stream/kafka: describe topic %s: %w", l.cfg.Topic, d.Err)
	}
	if n := len(d.Partitions); n != l.cfg.Partitions {
		return wamux.Errorf(wamux.EInvalid, "stream/kafka: topic %s has %d partitions, not %d", l.cfg.Topic, n, l.cfg.Partitions)
	}
	return nil
}

// Ping reports whether a broker answers within ctx (readiness).
func (l *Log) Ping(ctx context.Context) error {
	if err := l.prod.Ping(ctx); err != nil {
		return fmt.Errorf("stream/kafka: ping: %w", err)
	}
	return nil
}

// Partitions implements stream.Log.
func (l *Log) Partitions() int { return l.cfg.Partitions }

// Append implements stream.Log: it returns once every in-sync replica
// has the records.
func (l *Log) Append(ctx context.Context, rs []stream.Record) error {
	if len(rs) == 0 {
		return nil
	}
	if l.isClosed() {
		return stream.ErrClosed
	}
	krs := make([]*kgo.Record, len(rs))
	for i, r := range rs {
		krs[i] = &kgo.Record{
			Key:       []byte(r.Key),
			Value:     r.Value,
			Partition: stream.PartitionOf(r.Key, l.cfg.Partitions),
		}
	}
	if err := l.prod.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		return fmt.Errorf("stream/kafka: append: %w", err)
	}
	for i, kr := range krs {
		rs[i].Partition, rs[i].Offset = kr.Partition, kr.Offset
	}
	return nil
}

// Commit implements stream.Log with a synchronous offset commit through
// the client of the member holding the partition.
func (l *Log) Commit(ctx context.Context, partition int32, offset int64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("stream/kafka: commit partition %d: %w", partition, err)
	}
	l.ownMu.RLock()
	defer l.ownMu.RUnlock()
	m := l.owners[partition]
	if m == nil {
		return fmt.Errorf("stream/kafka: commit partition %d: %w", partition, stream.ErrNotAssigned)
	}
	var cerr error
	offsets := map[string]map[int32]kgo.EpochOffset{
		l.cfg.Topic: {partition: {Epoch: -1, Offset: offset + 1}}, // Kafka commits the next offset to read
	}
	m.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			cerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					cerr = err
				}
			}
		}
	})
	switch {
	case errors.Is(cerr, kerr.IllegalGeneration), errors.Is(cerr, kerr.UnknownMemberID),
		errors.Is(cerr, kerr.RebalanceInProgress), errors.Is(cerr, kerr.FencedInstanceID):
		return fmt.Errorf("stream/kafka: commit partition %d: %w (%w)", partition, stream.ErrNotAssigned, cerr)
	case cerr != nil:
		return fmt.Errorf("stream/kafka: commit partition %d: %w", partition, cerr)
	}
	return nil
}

// Close implements stream.Log: running Consume calls leave the group and
// return, then the producer closes.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return stream.ErrClosed
	}
	l.closed = true
	close(l.closing)
	l.mu.Unlock()
	l.consumers.Wait()
	l.prod.Close()
	return nil
}

func (l *Log) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}
