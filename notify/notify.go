// Package notify carries short messages from one part of the gateway to
// every subscriber of a topic: in process (Local) or, in cluster mode,
// between nodes (notify/redisnotify). Delivery is at most once and
// best-effort: a message is a nudge ("the settings changed, read them
// again"), never the state itself, which stays in the store.
package notify

import (
	"context"
	"errors"
	"sync"
)

// Notifier publishes messages to a topic and delivers them to its
// subscribers. Implementations pass notifytest.Run.
type Notifier interface {
	// Publish sends payload to every subscriber of topic, including those
	// of this Notifier.
	Publish(ctx context.Context, topic string, payload []byte) error
	// Subscribe calls fn with each message published to topic from the
	// moment it returns until stop is called; one subscription's calls
	// come one at a time, in the order of publication by any one
	// publisher. stop waits for the calls under way or pending to return
	// (so fn must not call it).
	Subscribe(ctx context.Context, topic string, fn func(payload []byte)) (stop func(), err error)
}

// Resuming is a Notifier whose subscriptions can break and be made again
// (Redis: a lost connection). Messages published while a subscription is
// broken are lost; resumed tells the subscriber, so it can read again
// what the messages would have told it.
type Resuming interface {
	Notifier
	// SubscribeResuming is Subscribe, also calling resumed each time the
	// subscription is made again after a break, in order with fn's calls.
	SubscribeResuming(ctx context.Context, topic string, fn func(payload []byte), resumed func()) (stop func(), err error)
}

// Buffer is how many messages a subscription holds for its fn: beyond it
// a subscriber too slow for its publishers misses messages, as a Redis
// pub/sub client does.
const Buffer = 256

// ErrClosed is returned by a closed Local.
var ErrClosed = errors.New("notify: closed")

// Local is the in-process Notifier: subscribers of one Local only.
type Local struct {
	mu     sync.Mutex
	subs   map[string]map[*localSub]struct{}
	closed bool
}

type localSub struct {
	ch   chan []byte
	done chan struct{}
}

var _ Notifier = (*Local)(nil)

// NewLocal returns an in-process Notifier.
func NewLocal() *Local { return &Local{subs: make(map[string]map[*localSub]struct{})} }

// Publish implements Notifier. It never blocks on a subscriber.
func (l *Local) Publish(_ context.Context, topic string, payload []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	for s := range l.subs[topic] {
		select {
		case s.ch <- append([]byte(nil), payload...):
		default: // full: this subscriber misses the message
		}
	}
	return nil
}

// Subscribe implements Notifier.
func (l *Local) Subscribe(_ context.Context, topic string, fn func([]byte)) (func(), error) {
	s := &localSub{ch: make(chan []byte, Buffer), done: make(chan struct{})}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, ErrClosed
	}
	if l.subs[topic] == nil {
		l.subs[topic] = make(map[*localSub]struct{})
	}
	l.subs[topic][s] = struct{}{}
	l.mu.Unlock()
	go func() {
		defer close(s.done)
		for p := range s.ch {
			fn(p)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			if _, ok := l.subs[topic][s]; ok {
				delete(l.subs[topic], s)
				close(s.ch)
			}
			l.mu.Unlock()
		})
		<-s.done
	}, nil
}

// Close ends every subscription; their stop functions still wait.
func (l *Local) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	for _, subs := range l.subs {
		for s := range subs {
			close(s.ch)
		}
	}
	l.subs = nil
}
