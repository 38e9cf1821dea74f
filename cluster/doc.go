// Package cluster holds the cluster-mode integration tests: `wamux serve`
// children sharing a kfake Kafka cluster of three brokers on TCP, one
// PostgreSQL schema and one Redis key prefix, checked against the
// simulator's ground truth (docs/cluster.md).
package cluster
