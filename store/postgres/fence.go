package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

var _ store.FenceStore = (*Store)(nil)

// AcquirePartition bumps the partition's epoch and names node its holder
// in one statement. Its row lock conflicts with the share lock a fenced
// update takes on the same row (fencedSQL), so an acquisition commits
// only after every fenced update that read the old epoch, and those that
// read it later find the new one.
func (s *Store) AcquirePartition(ctx context.Context, partition int, node string) (int64, error) {
	if err := store.ValidatePartition(partition, node); err != nil {
		return 0, err
	}
	if s.closed.Load() {
		return 0, errClosed
	}
	if !storable(node) {
		return 0, wamux.Errorf(wamux.EInvalid, "node id of partition %d is not valid text", partition)
	}
	var epoch int64
	err := s.pool.QueryRow(ctx, `INSERT INTO partition_leases AS l (partition_id, epoch, holder, acquired_at) VALUES ($1, 1, $2, $3)
		ON CONFLICT (partition_id) DO UPDATE SET epoch = l.epoch + 1, holder = excluded.holder, acquired_at = excluded.acquired_at
		RETURNING epoch`, partition, node, ms(s.now())).Scan(&epoch)
	if err != nil {
		return 0, fmt.Errorf("postgres: acquire partition %d: %w", partition, wrapErr(err))
	}
	return epoch, nil
}

// PartitionEpoch reads the partition's epoch, 0 when never acquired.
func (s *Store) PartitionEpoch(ctx context.Context, partition int) (int64, error) {
	if s.closed.Load() {
		return 0, errClosed
	}
	var epoch int64
	err := s.pool.QueryRow(ctx, `SELECT epoch FROM partition_leases WHERE partition_id = $1`, partition).Scan(&epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: read epoch of partition %d: %w", partition, wrapErr(err))
	}
	return epoch, nil
}

// PartitionLeases reads every partition's lease.
func (s *Store) PartitionLeases(ctx context.Context) ([]store.PartitionLease, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	rows, err := s.pool.Query(ctx, `SELECT partition_id, epoch, holder, acquired_at FROM partition_leases ORDER BY partition_id`)
	if err != nil {
		return nil, fmt.Errorf("postgres: read partition leases: %w", wrapErr(err))
	}
	defer rows.Close()
	var out []store.PartitionLease
	for rows.Next() {
		var l store.PartitionLease
		var at int64
		if err := rows.Scan(&l.Partition, &l.Epoch, &l.Holder, &at); err != nil {
			return nil, fmt.Errorf("postgres: read partition leases: %w", wrapErr(err))
		}
		l.AcquiredAt = fromMS(at)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: read partition leases: %w", wrapErr(err))
	}
	return out, nil
}

// fencedSQL is the condition a fenced update adds to its WHERE clause
// ($9 partition, $10 epoch). FOR SHARE holds the lease row until the
// update commits, so no acquisition commits between check and write; one
// that committed first is seen, as a locking read follows the row to its
// newest version.
const fencedSQL = ` AND EXISTS (SELECT 1 FROM partition_leases WHERE partition_id = $9 AND epoch = $10 FOR SHARE)`

// checkFence is why a fenced update changed no row when its fence is
// stale: an error wrapping store.ErrFenced; nil when the fence holds.
func checkFence(ctx context.Context, q querier, msgID string, f store.Fence) error {
	var epoch int64
	err := q.QueryRow(ctx, `SELECT epoch FROM partition_leases WHERE partition_id = $1`, f.Partition).Scan(&epoch)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: update message: read epoch of partition %d: %w", f.Partition, wrapErr(err))
	}
	if epoch != f.Epoch {
		return store.FencedError(msgID, f, epoch)
	}
	return nil
}
