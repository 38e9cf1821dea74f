package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/wamux/wamux/store"
)

var _ store.FenceStore = (*Store)(nil)

// AcquirePartition bumps the partition's epoch and names node its holder,
// in one statement through the writer, so acquisitions are serialised
// with every fenced update.
func (s *Store) AcquirePartition(ctx context.Context, partition int, node string) (int64, error) {
	if err := store.ValidatePartition(partition, node); err != nil {
		return 0, err
	}
	var epoch int64
	err := s.writeOneStatement(ctx, func(w *writeTx) error {
		_, err := w.queryRow(`INSERT INTO partition_leases (partition_id, epoch, holder, acquired_at) VALUES (?, 1, ?, ?)
			ON CONFLICT (partition_id) DO UPDATE SET epoch = epoch + 1, holder = excluded.holder, acquired_at = excluded.acquired_at
			RETURNING epoch`, []any{partition, node, ms(s.now())}, &epoch)
		if err != nil {
			return fmt.Errorf("sqlite: acquire partition %d: %w", partition, wrapErr(err))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return epoch, nil
}

// PartitionEpoch reads the partition's epoch, 0 when never acquired.
func (s *Store) PartitionEpoch(ctx context.Context, partition int) (int64, error) {
	var epoch int64
	err := s.rqueryRow(ctx, `SELECT epoch FROM partition_leases WHERE partition_id = ?`, partition).Scan(&epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: read epoch of partition %d: %w", partition, wrapErr(err))
	}
	return epoch, nil
}

// PartitionLeases reads every partition's lease.
func (s *Store) PartitionLeases(ctx context.Context) ([]store.PartitionLease, error) {
	rows, err := s.rquery(ctx, `SELECT partition_id, epoch, holder, acquired_at FROM partition_leases ORDER BY partition_id`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read partition leases: %w", wrapErr(err))
	}
	defer rows.Close()
	var out []store.PartitionLease
	for rows.Next() {
		var l store.PartitionLease
		var at int64
		if err := rows.Scan(&l.Partition, &l.Epoch, &l.Holder, &at); err != nil {
			return nil, fmt.Errorf("sqlite: read partition leases: %w", wrapErr(err))
		}
		l.AcquiredAt = fromMS(at)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read partition leases: %w", wrapErr(err))
	}
	return out, nil
}

// fencedSQL is the condition a fenced update adds to its WHERE clause:
// evaluated in the update's own statement, under the writer's
// transaction, so no acquisition can come between check and write.
const fencedSQL = ` AND (SELECT epoch FROM partition_leases WHERE partition_id = ?) = ?`

// checkFence is why a fenced update changed no row when its fence is
// stale: an error wrapping store.ErrFenced; nil when the fence holds.
func checkFence(w *writeTx, msgID string, f store.Fence) error {
	var epoch int64
	found, err := w.queryRow(`SELECT epoch FROM partition_leases WHERE partition_id = ?`, []any{f.Partition}, &epoch)
	if err != nil {
		return fmt.Errorf("sqlite: update message: read epoch of partition %d: %w", f.Partition, wrapErr(err))
	}
	if !found || epoch != f.Epoch {
		return store.FencedError(msgID, f, epoch)
	}
	return nil
}
