// Package stream is the durable log that carries work partitioned by
// account: records are appended under an account id, land in the
// partition wamux.PartitionOf gives that id, and are consumed per
// partition, in offset order, by a consumer group in which each partition
// is held by one consumer at a time.
//
// Delivery is at least once. A consumer commits an offset once the store
// committed what the records up to it carried; after a restart or a
// rebalance, consumption of a partition resumes after its last committed
// offset, so records not yet committed come again.
//
// Backends: stream/local (one process, durable in a SQLite file) and
// stream/kafka (a Kafka topic and consumer group). Both pass the
// conformance suite in stream/streamtest.
package stream

import (
	"context"
	"errors"

	"github.com/wamux/wamux"
)

// Record is one entry of the log.
type Record struct {
	// Partition is wamux.PartitionOf(Key, Log.Partitions()); Append sets it.
	Partition int32
	// Offset is the record's position in its partition, growing by
	// append order from 0; Append sets it.
	Offset int64
	// Key is the account id: records with one key stay in one partition,
	// in append order.
	Key   string
	Value []byte
}

// Log is a partitioned, durable stream with one consumer group.
type Log interface {
	// Partitions is the fixed number of partitions.
	Partitions() int
	// Append stores the records durably and sets each one's Partition and
	// Offset. When it returns nil every record is durable; on an error
	// some may have been stored (a retry may store them twice). Records of
	// one key keep their order within one call and across calls that do
	// not overlap in time.
	Append(ctx context.Context, rs []Record) error
	// Consume joins the group as one member and runs until ctx ends, then
	// leaves it: the partitions it held are revoked and move to the other
	// members. Each call is a separate member, so several calls split the
	// partitions between them. It returns nil when ctx ended, the
	// handler's error when Batch failed (after revoking its partitions),
	// or the backend's error.
	Consume(ctx context.Context, h Handler) error
	// Commit records that every record of partition up to and including
	// offset is processed. Offsets of a partition must be committed in
	// increasing order. It fails with ErrNotAssigned unless a Consume of
	// this Log holds the partition (Handler.Revoked may still commit).
	Commit(ctx context.Context, partition int32, offset int64) error
	// Close releases the log. Consume calls still running return.
	Close() error
}

// Handler receives a member's partitions and their records.
//
// Assigned and Revoked of one member are never called concurrently with
// each other. Batch is called for one partition at a time, in offset
// order, only between the partition's Assigned and Revoked; batches of
// different partitions may run concurrently.
type Handler interface {
	// Assigned hands partitions to the member; their records follow,
	// starting after each one's last committed offset.
	Assigned(ctx context.Context, partitions []int32)
	// Revoked takes partitions away. It is called after their in-flight
	// batches returned and before any other member gets them, with a
	// context that stays live while Consume ends, so the handler can
	// finish or abandon its work and Commit what it completed.
	Revoked(ctx context.Context, partitions []int32)
	// Batch delivers the next records of one partition. ctx ends when
	// Consume's does. An error ends the member's Consume with it.
	Batch(ctx context.Context, partition int32, records []Record) error
}

// Funcs is a Handler built from functions; a nil function does nothing.
type Funcs struct {
	OnAssigned func(ctx context.Context, partitions []int32)
	OnRevoked  func(ctx context.Context, partitions []int32)
	OnBatch    func(ctx context.Context, partition int32, records []Record) error
}

// Assigned implements Handler.
func (f Funcs) Assigned(ctx context.Context, partitions []int32) {
	if f.OnAssigned != nil {
		f.OnAssigned(ctx, partitions)
	}
}

// Revoked implements Handler.
func (f Funcs) Revoked(ctx context.Context, partitions []int32) {
	if f.OnRevoked != nil {
		f.OnRevoked(ctx, partitions)
	}
}

// Batch implements Handler.
func (f Funcs) Batch(ctx context.Context, partition int32, records []Record) error {
	if f.OnBatch != nil {
		return f.OnBatch(ctx, partition, records)
	}
	return nil
}

// PartitionOf is the partition of key among n: wamux.PartitionOf as the
// partition type of Record.
func PartitionOf(key string, n int) int32 { return int32(wamux.PartitionOf(key, n)) }

var (
	// ErrNotAssigned is Commit's error for a partition this Log's
	// consumers do not hold (any more): its records go to the member that
	// holds it, from the last committed offset.
	ErrNotAssigned = errors.New("stream: partition not assigned to this consumer")
	// ErrClosed is the error of calls on a closed Log.
	ErrClosed = errors.New("stream: log closed")
)
