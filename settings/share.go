package settings

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/wamux/wamux/notify"
)

// Topic is the notify topic on which Managers announce changes.
const Topic = "settings"

// reloadTimeout bounds the store read a change announcement starts.
const reloadTimeout = 5 * time.Second

// peers is how a shared Manager reaches the others.
type peers struct {
	n  notify.Notifier
	id string // this Manager's, so it ignores its own announcements
}

// announcement is the whole message: who changed the settings. The values
// are read from the store, which stays their one source.
type announcement struct {
	From string `json:"from"`
}

// ResyncEveryDefault is how often a shared Manager reads the store
// again on its own: the longest a change whose announcement it missed
// stays unseen.
const ResyncEveryDefault = 30 * time.Second

// TimerClock runs f once d has passed; the stop it returns prevents that
// and reports whether it did. Tests pass a fakeclock.
type TimerClock interface {
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type systemTimers struct{}

func (systemTimers) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// ShareConfig configures Share.
type ShareConfig struct {
	// Notifier carries the announcements between the nodes.
	Notifier notify.Notifier
	// ResyncEvery is how often the Manager reads the store again whether
	// or not it was told of a change, since announcements can be lost;
	// ResyncEveryDefault when zero.
	ResyncEvery time.Duration
	// Clock times the re-reads; the system clock when nil.
	Clock TimerClock
}

// Share makes m one of several Managers (one per node) over one store:
// each Update announces itself on cfg.Notifier, and an announcement from
// another Manager makes m read the store again and apply what changed,
// calling its listeners as an Update would. Announcements are at most
// once, so m also reads the store every ResyncEvery and, when the
// Notifier is notify.Resuming, each time its subscription is made again
// after a break. Without Share a Manager sees only its own changes. stop
// ends the sharing; it must be called before the store is closed.
func (m *Manager) Share(ctx context.Context, cfg ShareConfig) (stop func(), err error) {
	if cfg.Notifier == nil {
		return nil, errors.New("share settings: no notifier")
	}
	if cfg.ResyncEvery <= 0 {
		cfg.ResyncEvery = ResyncEveryDefault
	}
	if cfg.Clock == nil {
		cfg.Clock = systemTimers{}
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	p := &peers{n: cfg.Notifier, id: hex.EncodeToString(b)}
	fn := func(payload []byte) {
		var a announcement
		if err := json.Unmarshal(payload, &a); err != nil {
			m.log.Warn("ignoring a malformed settings announcement", "err", err)
			return
		}
		if a.From != p.id {
			m.reloadFor("a change on another node")
		}
	}
	var unsubscribe func()
	if r, ok := cfg.Notifier.(notify.Resuming); ok {
		unsubscribe, err = r.SubscribeResuming(ctx, Topic, fn, func() { m.reloadFor("the settings subscription resumed") })
	} else {
		unsubscribe, err = cfg.Notifier.Subscribe(ctx, Topic, fn)
	}
	if err != nil {
		return nil, fmt.Errorf("share settings: %w", err)
	}
	m.peers.Store(p)
	stopResync := m.resync(cfg.Clock, cfg.ResyncEvery)
	return func() {
		m.peers.CompareAndSwap(p, nil)
		stopResync()
		unsubscribe()
	}, nil
}

// reloadFor reloads the store, logging a failure with why it reloaded.
func (m *Manager) reloadFor(why string) {
	ctx, cancel := context.WithTimeout(context.Background(), reloadTimeout)
	defer cancel()
	if err := m.Reload(ctx); err != nil {
		m.log.Error("reload settings", "after", why, "err", err)
	}
}

// resync reloads the store every every on clock until stop, which waits
// for a reload under way.
func (m *Manager) resync(clock TimerClock, every time.Duration) (stop func()) {
	var (
		mu      sync.Mutex
		stopped bool
		disarm  func() bool
		running sync.WaitGroup
	)
	var fire func()
	fire = func() {
		mu.Lock()
		if stopped {
			mu.Unlock()
			return
		}
		running.Add(1)
		mu.Unlock()
		defer running.Done()
		m.reloadFor("the periodic re-sync")
		mu.Lock()
		if !stopped {
			disarm = clock.AfterFunc(every, fire)
		}
		mu.Unlock()
	}
	mu.Lock()
	disarm = clock.AfterFunc(every, fire)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		d := disarm
		mu.Unlock()
		d()
		running.Wait()
	}
}

// Reload reads the stored settings and puts them in force, calling the
// listeners when they differ from the snapshot in force.
func (m *Manager) Reload(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	stored, err := m.store.Settings(ctx)
	if err != nil {
		return fmt.Errorf("reload settings: %w", err)
	}
	old, next := *m.cur.Load(), fromStored(stored, m.log)
	if next != old {
		m.swap(ctx, old, next, Keys())
	}
	return nil
}

// tellPeers announces a change to the other Managers. A failure is
// logged: the change is stored, and they see it at the next announcement
// they receive.
func (m *Manager) tellPeers(ctx context.Context) {
	p := m.peers.Load()
	if p == nil {
		return
	}
	msg, _ := json.Marshal(announcement{From: p.id})
	if err := p.n.Publish(ctx, Topic, msg); err != nil {
		m.log.Error("announce settings change to the other nodes", "err", err)
	}
}
