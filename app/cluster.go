package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/internal/seal"
	"github.com/wamux/wamux/notify"
	"github.com/wamux/wamux/notify/redisnotify"
	"github.com/wamux/wamux/outbound"
	"github.com/wamux/wamux/ownership"
	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/ratelimit/redislimit"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/receipts/redisbloom"
	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/stream"
	"github.com/wamux/wamux/stream/kafka"
)

// Cluster mode: every node shares the PostgreSQL store, the receipt topic
// and Redis. The receipt topic's consumer group decides which node works
// on which account: the partitions it assigns a node are acquired in the
// store (ownership.Cluster) before that node merges their receipts, and
// the dispatcher follows the same ownership, so one membership decides
// both pipelines of an account.
const (
	// ReceiptTopic is the Kafka topic of the receipt log; its consumer
	// group is ReceiptGroup.
	ReceiptTopic = "wamux.receipts"
	ReceiptGroup = "wamux"
	// ClusterPartitions is the receipt topic's partition count, so the
	// number of ownership units accounts are spread over. Every node of a
	// cluster must agree on it; a topic created with another count stops
	// the start.
	ClusterPartitions = 16
	// clusterSessionTimeout is how long the group waits for a silent
	// member before it moves its partitions: most of the time a dead
	// node's accounts wait for another owner. Heartbeats go out every
	// clusterHeartbeat, so a member learns of a rebalance within it.
	clusterSessionTimeout = 6 * time.Second
	clusterHeartbeat      = time.Second
	// ClusterTimeoutDefault bounds reaching Kafka and Redis at start, and
	// one append to the receipt topic, so that intake answers 503 while
	// Kafka is unreachable instead of holding the webhook until Meta
	// gives up (App.ClusterTimeout).
	ClusterTimeoutDefault = 10 * time.Second
	// reassignEvery is how often a partition the group assigned but the
	// store did not let this node acquire (the store was unreachable) is
	// tried again.
	reassignEvery = 5 * time.Second
)

// clusterParts are the shared backends of a cluster node.
type clusterParts struct {
	redis    *redis.Client
	kafka    *kafka.Log
	own      *ownership.Cluster
	stream   *ownedStream
	notifier notify.Notifier
	limiter  *ratelimit.Fallback
	pairs    ratelimit.Pairs
	appPause ratelimit.AppPause
	depart   ratelimit.Departures
	bloom    receipts.Filter
	// stopShare ends the settings fan-out, stopFollow the dispatcher's
	// subscriptions to other nodes' announcements.
	stopShare, stopFollow func()
}

// startCluster connects to Redis and Kafka and builds what rests on them,
// each within the ClusterTimeout; an unreachable one is named in the
// error.
func (a *App) startCluster(ctx context.Context, u *undoStack, st store.Store, keys *seal.Keyring) (*clusterParts, error) {
	fences, ok := st.(store.FenceStore)
	if !ok {
		return nil, fmt.Errorf("app: store %s keeps no partition leases; cluster mode needs PostgreSQL", a.storeName())
	}
	c := &clusterParts{}
	rdb, err := a.connectRedis(ctx)
	if err != nil {
		return nil, err
	}
	c.redis = rdb
	u.push(func() { rdb.Close() })
	if err := c.buildRedisParts(ctx, a, keys); err != nil {
		return nil, err
	}
	log, err := a.connectKafka(ctx)
	if err != nil {
		return nil, err
	}
	c.kafka = log
	u.push(func() { log.Close() })
	own, err := ownership.NewCluster(ownership.Config{Store: fences, Node: a.cfg.NodeID, Partitions: log.Partitions(), Logger: a.log})
	if err != nil {
		return nil, fmt.Errorf("app: ownership: %w", err)
	}
	c.own = own
	u.push(func() { own.Close() })
	c.stream = newOwnedStream(log, own, a.log)
	u.push(c.stream.stop)
	return c, nil
}

func (a *App) clusterTimeout() time.Duration {
	if a.ClusterTimeout > 0 {
		return a.ClusterTimeout
	}
	return ClusterTimeoutDefault
}

// connectRedis opens the client and pings the server.
func (a *App) connectRedis(ctx context.Context) (*redis.Client, error) {
	opt := &redis.Options{Addr: a.cfg.Redis}
	if strings.HasPrefix(a.cfg.Redis, "redis://") || strings.HasPrefix(a.cfg.Redis, "rediss://") {
		var err error
		if opt, err = redis.ParseURL(a.cfg.Redis); err != nil {
			return nil, fmt.Errorf("app: redis URL: %w", err)
		}
	}
	rdb := redis.NewClient(opt)
	c, cancel := context.WithTimeout(ctx, a.clusterTimeout())
	defer cancel()
	if err := rdb.Ping(c).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("app: redis %s does not answer: %w", opt.Addr, err)
	}
	return rdb, nil
}

// buildRedisParts builds the shared limiter (behind a Fallback that
// limits on its own while Redis is away), the pair limiter, the app
// pause, the departure schedule, the receipt Bloom filter and the
// notifier.
func (c *clusterParts) buildRedisParts(ctx context.Context, a *App, keys *seal.Keyring) error {
	prefix := a.cfg.RedisPrefix
	shared, err := redislimit.New(redislimit.Config{Client: c.redis, Prefix: prefix})
	if err != nil {
		return fmt.Errorf("app: redis limiter: %w", err)
	}
	// Each account has one owner at a time, so the owner may take the
	// account's whole limit on its own.
	c.limiter, err = ratelimit.NewFallback(ratelimit.FallbackConfig{Shared: shared, Share: 1, Logger: a.log, Registry: a.registry})
	if err != nil {
		return fmt.Errorf("app: limiter fallback: %w", err)
	}
	rkey, err := redislimit.RecipientKey(keys)
	if err != nil {
		return fmt.Errorf("app: pair limiter key: %w", err)
	}
	sharedPairs, err := redislimit.NewPairs(redislimit.PairsConfig{Client: c.redis, Prefix: prefix, RecipientKey: rkey})
	if err != nil {
		return fmt.Errorf("app: redis pair limiter: %w", err)
	}
	c.pairs, err = ratelimit.NewPairsFallback(ratelimit.PairsFallbackConfig{Shared: sharedPairs, Logger: a.log, Registry: a.registry})
	if err != nil {
		return fmt.Errorf("app: pair limiter fallback: %w", err)
	}
	sharedPause, err := redislimit.NewAppPause(redislimit.AppPauseConfig{Client: c.redis, Prefix: prefix})
	if err != nil {
		return fmt.Errorf("app: redis app pause: %w", err)
	}
	c.appPause, err = ratelimit.NewAppPauseFallback(ratelimit.AppPauseFallbackConfig{Shared: sharedPause, Logger: a.log, Registry: a.registry})
	if err != nil {
		return fmt.Errorf("app: app pause fallback: %w", err)
	}
	sharedDepart, err := redislimit.NewDepartures(redislimit.DeparturesConfig{Client: c.redis, Prefix: prefix})
	if err != nil {
		return fmt.Errorf("app: redis departure schedule: %w", err)
	}
	c.depart, err = ratelimit.NewDeparturesFallback(ratelimit.DeparturesFallbackConfig{Shared: sharedDepart, Logger: a.log, Registry: a.registry})
	if err != nil {
		return fmt.Errorf("app: departure schedule fallback: %w", err)
	}
	bloomCfg := a.bloomConfig()
	bctx, cancel := context.WithTimeout(ctx, a.clusterTimeout())
	defer cancel()
	c.bloom, err = redisbloom.New(bctx, redisbloom.Config{Client: c.redis, Prefix: prefix, Bloom: bloomCfg})
	if err != nil {
		return fmt.Errorf("app: redis receipt Bloom filter: %w", err)
	}
	c.notifier, err = redisnotify.New(redisnotify.Config{Client: c.redis, Prefix: prefix})
	if err != nil {
		return fmt.Errorf("app: redis notifier: %w", err)
	}
	return nil
}

// connectKafka opens the receipt topic (creating it when missing) within
// the ClusterTimeout.
func (a *App) connectKafka(ctx context.Context) (*kafka.Log, error) {
	brokers := strings.Split(a.cfg.Kafka, ",")
	for i := range brokers {
		brokers[i] = strings.TrimSpace(brokers[i])
	}
	bound := a.clusterTimeout()
	c, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	log, err := kafka.Open(c, kafka.Config{
		Brokers: brokers, Topic: ReceiptTopic, Group: ReceiptGroup, Partitions: ClusterPartitions,
		SessionTimeout: clusterSessionTimeout, HeartbeatInterval: clusterHeartbeat,
		ClientOpts: []kgo.Opt{kgo.RecordDeliveryTimeout(bound)},
	})
	if err != nil {
		return nil, fmt.Errorf("app: kafka %s (topic %s) is not reachable within %s: %w", a.cfg.Kafka, ReceiptTopic, bound, err)
	}
	return log, nil
}

// share makes the settings follow changes made on other nodes.
func (c *clusterParts) share(ctx context.Context, u *undoStack, set *settings.Manager) error {
	stop, err := set.Share(ctx, settings.ShareConfig{Notifier: c.notifier})
	if err != nil {
		return fmt.Errorf("app: share settings over redis: %w", err)
	}
	var once sync.Once
	c.stopShare = func() { once.Do(stop) }
	u.push(c.stopShare)
	return nil
}

// follow makes the dispatcher follow other nodes' announcements and
// returns it as the API's intake, announcing what this node stores.
func (c *clusterParts) follow(ctx context.Context, u *undoStack, a *App, st store.Store, disp *outbound.Dispatcher) (httpapi.Outbound, error) {
	accounts := notify.NewAccountChanges(c.notifier, a.log)
	stop, err := followCluster(ctx, disp, st, c.own, c.notifier, accounts, a.log)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	c.stopFollow = func() { once.Do(stop) }
	u.push(c.stopFollow)
	return &clusterOutbound{Outbound: disp, own: c.own, notifier: c.notifier, accounts: accounts, log: a.log}, nil
}

// readyChecks are what /readyz asks besides the store.
// partitions is the number of partitions accounts are spread over: 0 on
// one node.
func (c *clusterParts) partitions() int {
	if c == nil {
		return 0
	}
	return c.kafka.Partitions()
}

func (c *clusterParts) readyChecks() []httpapi.ReadyCheck {
	if c == nil {
		return nil
	}
	return []httpapi.ReadyCheck{
		{Name: "kafka", Ping: c.kafka.Ping},
		{Name: "redis", Ping: func(ctx context.Context) error { return c.redis.Ping(ctx).Err() }},
	}
}

// close releases what startCluster opened, after the pipelines stopped.
func (c *clusterParts) close() error {
	if c.stopFollow != nil {
		c.stopFollow()
	}
	if c.stopShare != nil {
		c.stopShare()
	}
	c.stream.stop()
	c.own.Close()
	var errs []error
	if err := c.kafka.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close kafka: %w", err))
	}
	if err := c.redis.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close redis: %w", err))
	}
	return errors.Join(errs...)
}

// ownedStream is the receipt log whose consumer group drives the node's
// ownership: a partition assigned to the receipt pipeline is acquired in
// the store first (fencing its previous holder's sends), and one revoked
// is dropped after the pipeline finished with it, so the dispatcher has
// handed it back before any other member gets it.
type ownedStream struct {
	stream.Log
	own *ownership.Cluster
	log *slog.Logger

	mu sync.Mutex
	// assigned are the partitions the group gave this node; each is held
	// in own unless its acquisition failed, which retry repeats.
	assigned map[int32]bool
	quit     chan struct{}
	done     chan struct{}
	once     sync.Once
}

func newOwnedStream(l stream.Log, own *ownership.Cluster, log *slog.Logger) *ownedStream {
	s := &ownedStream{Log: l, own: own, log: log, assigned: map[int32]bool{}, quit: make(chan struct{}), done: make(chan struct{})}
	go s.retry()
	return s
}

// Consume implements stream.Log.
func (s *ownedStream) Consume(ctx context.Context, h stream.Handler) error {
	return s.Log.Consume(ctx, ownedHandler{Handler: h, s: s})
}

// acquire acquires ps in the store; the caller holds mu.
func (s *ownedStream) acquire(ctx context.Context, ps []int32) {
	parts := make([]int, len(ps))
	for i, p := range ps {
		parts[i] = int(p)
	}
	if err := s.own.Assign(ctx, parts); err != nil {
		s.log.Error("cluster: assigned partitions not acquired in the store; their accounts wait here until they are", "partitions", ps, "err", err)
	}
}

// retry acquires again, every reassignEvery, the assigned partitions that
// are not held.
func (s *ownedStream) retry() {
	defer close(s.done)
	t := time.NewTicker(reassignEvery)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		s.mu.Lock()
		held := map[int32]bool{}
		for _, l := range s.own.Held() {
			held[int32(l.Partition)] = true
		}
		var missing []int32
		for p := range s.assigned {
			if !held[p] {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), reassignEvery)
			s.acquire(ctx, missing)
			cancel()
		}
		s.mu.Unlock()
	}
}

func (s *ownedStream) stop() {
	s.once.Do(func() {
		close(s.quit)
		<-s.done
	})
}

// ownedHandler is the receipt pipeline's handler behind the ownership.
type ownedHandler struct {
	stream.Handler
	s *ownedStream
}

// Assigned implements stream.Handler.
func (h ownedHandler) Assigned(ctx context.Context, ps []int32) {
	h.s.mu.Lock()
	for _, p := range ps {
		h.s.assigned[p] = true
	}
	h.s.acquire(ctx, ps)
	h.s.mu.Unlock()
	h.Handler.Assigned(ctx, ps)
}

// Revoked implements stream.Handler.
func (h ownedHandler) Revoked(ctx context.Context, ps []int32) {
	h.Handler.Revoked(ctx, ps)
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	parts := make([]int, len(ps))
	for i, p := range ps {
		delete(h.s.assigned, p)
		parts[i] = int(p)
	}
	h.s.own.Revoke(parts)
}
