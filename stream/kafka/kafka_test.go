package kafka_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/wamux/wamux/stream"
	"github.com/wamux/wamux/stream/kafka"
	"github.com/wamux/wamux/stream/streamtest"
)

// newCluster starts a kfake cluster of three brokers, closed when t ends.
func newCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

var streams atomic.Int64

// testConfig is a fresh topic and group on c, with heartbeats frequent
// enough that a rebalance takes a fraction of a second.
func testConfig(c *kfake.Cluster, partitions int) kafka.Config {
	n := streams.Add(1)
	return kafka.Config{
		Brokers:           c.ListenAddrs(),
		Topic:             fmt.Sprintf("receipts-%d", n),
		Group:             fmt.Sprintf("wamux-%d", n),
		Partitions:        partitions,
		ReplicationFactor: 3,
		MaxPollRecords:    7,
		HeartbeatInterval: 50 * time.Millisecond,
		LeaveTimeout:      10 * time.Second,
	}
}

func open(t *testing.T, cfg kafka.Config) *kafka.Log {
	t.Helper()
	l, err := kafka.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

func TestConformance(t *testing.T) {
	streamtest.Run(t, func(t *testing.T, partitions int) func(*testing.T) stream.Log {
		cfg := testConfig(newCluster(t), partitions)
		return func(t *testing.T) stream.Log { return open(t, cfg) }
	})
}

// TestTwoNodesOverTCPShareTheTopic runs two Logs, as two nodes would,
// each with its own producer and consumer client, against a cluster's
// TCP listeners: they split the partitions, and when one node closes, the
// other takes its partitions over from the committed offsets.
func TestTwoNodesOverTCPShareTheTopic(t *testing.T) {
	const n = 4
	c := newCluster(t)
	cfg := testConfig(c, n)
	cfg.Brokers = c.ListenAddrs() // host:port of each broker's TCP listener
	a, b := open(t, cfg), open(t, cfg)
	defer a.Close()

	type event struct {
		node string
		kind string // "assigned", "revoked", "record" (processed and committed)
		ps   []int32
		val  string
	}
	events := make(chan event, 1024)
	consume := func(l *kafka.Log, name string) chan error {
		done := make(chan error, 1)
		go func() {
			done <- l.Consume(context.Background(), stream.Funcs{
				OnAssigned: func(_ context.Context, ps []int32) { events <- event{node: name, kind: "assigned", ps: ps} },
				OnRevoked:  func(_ context.Context, ps []int32) { events <- event{node: name, kind: "revoked", ps: ps} },
				OnBatch: func(ctx context.Context, p int32, rs []stream.Record) error {
					if err := l.Commit(ctx, p, rs[len(rs)-1].Offset); err != nil {
						return err
					}
					for _, r := range rs {
						events <- event{node: name, kind: "record", val: string(r.Value)}
					}
					return nil
				},
			})
		}()
		return done
	}
	holder := map[int32]string{}
	got := map[string]string{}
	// await applies events until cond holds.
	await := func(what string, cond func() bool) {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for !cond() {
			select {
			case e := <-events:
				switch e.kind {
				case "assigned":
					for _, p := range e.ps {
						if h, ok := holder[p]; ok {
							t.Errorf("partition %d assigned to %s while %s holds it", p, e.node, h)
						}
						holder[p] = e.node
					}
				case "revoked":
					for _, p := range e.ps {
						delete(holder, p)
					}
				case "record":
					if prev, ok := got[e.val]; ok {
						t.Errorf("%s delivered to %s after %s had it committed", e.val, e.node, prev)
					}
					got[e.val] = e.node
				}
			case <-timeout:
				t.Fatalf("timed out waiting for %s; holders %v", what, holder)
			}
		}
	}
	split := func() bool {
		seen := map[string]bool{}
		for _, h := range holder {
			seen[h] = true
		}
		return len(holder) == n && seen["a"] && seen["b"]
	}
	appendKeys := func(l *kafka.Log, round int) []string {
		var rs []stream.Record
		for i := range 3 * n {
			rs = append(rs, stream.Record{Key: fmt.Sprintf("acct-%d", i), Value: fmt.Appendf(nil, "r%d-%d", round, i)})
		}
		if err := l.Append(context.Background(), rs); err != nil {
			t.Fatalf("append: %v", err)
		}
		vals := make([]string, len(rs))
		for i, r := range rs {
			vals[i] = string(r.Value)
		}
		return vals
	}
	all := func(vals []string) func() bool {
		return func() bool {
			for _, v := range vals {
				if got[v] == "" {
					return false
				}
			}
			return true
		}
	}

	aDone := consume(a, "a")
	bDone := consume(b, "b")
	await("a and b splitting the partitions", split)
	vals := append(appendKeys(a, 1), appendKeys(b, 2)...)
	await("every record delivered", all(vals))

	if err := b.Close(); err != nil {
		t.Fatalf("close b: %v", err)
	}
	if err := <-bDone; err != nil {
		t.Errorf("b's Consume after Close: %v", err)
	}
	await("a holding every partition", func() bool {
		for p := range int32(n) {
			if holder[p] != "a" {
				return false
			}
		}
		return true
	})
	vals = append(vals, appendKeys(a, 3)...)
	await("every record delivered after b closed", all(vals))
	if err := a.Close(); err != nil {
		t.Fatalf("close a: %v", err)
	}
	if err := <-aDone; err != nil {
		t.Errorf("a's Consume after Close: %v", err)
	}
}

func TestOpenChecksAnExistingTopicsPartitions(t *testing.T) {
	c := newCluster(t)
	cfg := testConfig(c, 4)
	open(t, cfg).Close()
	cfg.Partitions = 8
	if l, err := kafka.Open(context.Background(), cfg); err == nil {
		l.Close()
		t.Fatal("opened a 4-partition topic as 8 partitions")
	}
}
