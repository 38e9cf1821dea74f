// Package notifytest is the conformance suite every notify.Notifier
// passes: the in-process one and the Redis one.
package notifytest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux/notify"
)

// NewNotifier builds a Notifier for a test. Notifiers built for one test
// share their topics (they are one gateway's nodes): a message published
// through one reaches the subscribers of all.
type NewNotifier func(t *testing.T) notify.Notifier

// Options describe what an implementation can do.
type Options struct {
	// Nodes says that two Notifiers built for one test are two nodes
	// sharing their topics; when false the suite uses one Notifier.
	Nodes bool
}

// Within bounds every delivery the suite waits for: a change must reach
// every node within a second.
const Within = time.Second

// Run runs the suite.
func Run(t *testing.T, newNotifier NewNotifier, opts Options) {
	nodes := func(t *testing.T) (notify.Notifier, notify.Notifier) {
		a := newNotifier(t)
		if opts.Nodes {
			return a, newNotifier(t)
		}
		return a, a
	}
	t.Run("Delivers", func(t *testing.T) { testDelivers(t, nodes) })
	t.Run("TopicsIndependent", func(t *testing.T) { testTopics(t, nodes) })
	t.Run("EverySubscriber", func(t *testing.T) { testEverySubscriber(t, nodes) })
	t.Run("InOrder", func(t *testing.T) { testInOrder(t, nodes) })
	t.Run("StopEndsDelivery", func(t *testing.T) { testStop(t, nodes) })
}

type inbox struct {
	mu  sync.Mutex
	got []string
	ch  chan struct{}
}

func newInbox() *inbox { return &inbox{ch: make(chan struct{}, 1)} }

func (b *inbox) fn(p []byte) {
	b.mu.Lock()
	b.got = append(b.got, string(p))
	b.mu.Unlock()
	select {
	case b.ch <- struct{}{}:
	default:
	}
}

// waitFor waits until the inbox holds n messages, and returns them.
func (b *inbox) waitFor(t *testing.T, n int) []string {
	t.Helper()
	timeout := time.NewTimer(Within)
	defer timeout.Stop()
	for {
		b.mu.Lock()
		got := slices.Clone(b.got)
		b.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-b.ch:
		case <-timeout.C:
			t.Fatalf("after %v: %d messages %q, want %d", Within, len(got), got, n)
		}
	}
}

func (b *inbox) messages() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.got)
}

func subscribe(t *testing.T, n notify.Notifier, topic string, b *inbox) func() {
	t.Helper()
	stop, err := n.Subscribe(t.Context(), topic, b.fn)
	if err != nil {
		t.Fatalf("Subscribe(%s): %v", topic, err)
	}
	t.Cleanup(stop)
	return stop
}

func publish(t *testing.T, n notify.Notifier, topic, msg string) {
	t.Helper()
	if err := n.Publish(t.Context(), topic, []byte(msg)); err != nil {
		t.Fatalf("Publish(%s): %v", topic, err)
	}
}

func testDelivers(t *testing.T, nodes func(*testing.T) (notify.Notifier, notify.Notifier)) {
	a, b := nodes(t)
	inA, inB := newInbox(), newInbox()
	subscribe(t, a, "settings", inA)
	subscribe(t, b, "settings", inB)
	publish(t, a, "settings", "v1")
	if got := inB.waitFor(t, 1); got[0] != "v1" {
		t.Fatalf("the other node got %q, want v1", got)
	}
	if got := inA.waitFor(t, 1); got[0] != "v1" {
		t.Fatalf("the publishing node got %q, want v1", got)
	}
}

// testTopics: a subscriber gets its topic's messages only.
func testTopics(t *testing.T, nodes func(*testing.T) (notify.Notifier, notify.Notifier)) {
	a, b := nodes(t)
	accounts, settings := newInbox(), newInbox()
	subscribe(t, b, "accounts", accounts)
	subscribe(t, b, "settings", settings)
	publish(t, a, "settings", "s1")
	publish(t, a, "accounts", "a1")
	if got := accounts.waitFor(t, 1); !slices.Equal(got, []string{"a1"}) {
		t.Fatalf("accounts got %q", got)
	}
	if got := settings.waitFor(t, 1); !slices.Equal(got, []string{"s1"}) {
		t.Fatalf("settings got %q", got)
	}
}

func testEverySubscriber(t *testing.T, nodes func(*testing.T) (notify.Notifier, notify.Notifier)) {
	a, b := nodes(t)
	var boxes []*inbox
	for i := range 4 {
		box := newInbox()
		subscribe(t, []notify.Notifier{a, b}[i%2], "t", box)
		boxes = append(boxes, box)
	}
	publish(t, b, "t", "m")
	for i, box := range boxes {
		if got := box.waitFor(t, 1); !slices.Equal(got, []string{"m"}) {
			t.Fatalf("subscriber %d got %q", i, got)
		}
	}
}

func testInOrder(t *testing.T, nodes func(*testing.T) (notify.Notifier, notify.Notifier)) {
	a, b := nodes(t)
	box := newInbox()
	subscribe(t, b, "t", box)
	var want []string
	for i := range 100 {
		want = append(want, fmt.Sprint(i))
		publish(t, a, "t", want[i])
	}
	if got := box.waitFor(t, 100); !slices.Equal(got, want) {
		t.Fatalf("got %q, want 0…99 in order", got)
	}
}

// testStop: once stop returns, no call of fn runs or follows.
func testStop(t *testing.T, nodes func(*testing.T) (notify.Notifier, notify.Notifier)) {
	a, b := nodes(t)
	stopped, live := newInbox(), newInbox()
	stop := subscribe(t, b, "t", stopped)
	subscribe(t, b, "t", live)
	publish(t, a, "t", "before")
	stopped.waitFor(t, 1)
	stop()
	stop() // a second stop is harmless
	publish(t, a, "t", "after")
	// The live subscriber seeing "after" means it was delivered; the
	// stopped one, subscribed on the same Notifier, must not have it.
	live.waitFor(t, 2)
	if got := stopped.messages(); !slices.Equal(got, []string{"before"}) {
		t.Fatalf("a stopped subscriber got %q", got)
	}
}
