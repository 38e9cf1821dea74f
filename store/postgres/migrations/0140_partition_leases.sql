-- Cluster mode's fencing: an account's work runs on the node holding its
-- partition (wamux.PartitionOf), and every acquisition of a partition
-- bumps its epoch by one (AcquirePartition). A message update carrying a
-- fence applies only while the partition is still at the fence's epoch,
-- so a node that lost the partition can no longer move its messages.
-- holder (the node id) and acquired_at (Unix ms) are for the operator.
CREATE TABLE partition_leases (
	partition_id INTEGER PRIMARY KEY,
	epoch        BIGINT  NOT NULL,
	holder       TEXT    NOT NULL,
	acquired_at  BIGINT  NOT NULL
);
