// Package redisnotify is the notify.Notifier of cluster mode: Redis
// pub/sub, one channel per topic (<prefix>notify:<topic>), so a message
// published on any node reaches the subscribers of every node. Like
// Redis pub/sub it is at most once: a node disconnected while a message
// is published misses it. The client resubscribes on reconnection, and
// SubscribeResuming tells the subscriber when it has.
package redisnotify

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wamux/wamux/notify"
)

// Config configures a Notifier.
type Config struct {
	// Client is the Redis connection; each subscription holds one
	// connection of its own.
	Client redis.UniversalClient
	// Prefix starts every channel name; "wamux:" by default.
	Prefix string
}

// Notifier publishes and subscribes through Redis pub/sub.
type Notifier struct {
	rdb    redis.UniversalClient
	prefix string
}

var _ notify.Resuming = (*Notifier)(nil)

// New builds a Notifier. It does not contact Redis.
func New(cfg Config) (*Notifier, error) {
	if cfg.Client == nil {
		return nil, errors.New("redisnotify: no Redis client")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "wamux:"
	}
	return &Notifier{rdb: cfg.Client, prefix: cfg.Prefix}, nil
}

func (n *Notifier) channel(topic string) string { return n.prefix + "notify:" + topic }

// Publish implements notify.Notifier.
func (n *Notifier) Publish(ctx context.Context, topic string, payload []byte) error {
	if err := n.rdb.Publish(ctx, n.channel(topic), payload).Err(); err != nil {
		return fmt.Errorf("publish to %s: redis: %w", topic, err)
	}
	return nil
}

// Subscribe implements notify.Notifier. It returns once Redis has
// confirmed the subscription.
func (n *Notifier) Subscribe(ctx context.Context, topic string, fn func([]byte)) (func(), error) {
	return n.SubscribeResuming(ctx, topic, fn, nil)
}

// SubscribeResuming implements notify.Resuming: after Redis confirmed the
// subscription, each further confirmation is a resubscription after the
// connection broke. It returns once Redis has confirmed the subscription.
func (n *Notifier) SubscribeResuming(ctx context.Context, topic string, fn func([]byte), resumed func()) (func(), error) {
	ps := n.rdb.Subscribe(ctx, n.channel(topic))
	if _, err := ps.Receive(ctx); err != nil {
		ps.Close()
		return nil, fmt.Errorf("subscribe to %s: redis: %w", topic, err)
	}
	ch := ps.ChannelWithSubscriptions(redis.WithChannelSize(notify.Buffer), redis.WithChannelSendTimeout(time.Second))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range ch {
			switch m := m.(type) {
			case *redis.Message:
				fn([]byte(m.Payload))
			case *redis.Subscription:
				if m.Kind == "subscribe" && resumed != nil {
					resumed()
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { _ = ps.Close() })
		<-done
	}, nil
}
