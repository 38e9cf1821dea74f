package settings

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

// Share makes m one of several Managers (one per node) over one store:
// each Update announces itself on n, and an announcement from another
// Manager makes m read the store again and apply what changed, calling
// its listeners as an Update would. Without Share a Manager sees only its
// own changes. stop ends the sharing; it must be called before the store
// is closed.
func (m *Manager) Share(ctx context.Context, n notify.Notifier) (stop func(), err error) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	p := &peers{n: n, id: hex.EncodeToString(b)}
	unsubscribe, err := n.Subscribe(ctx, Topic, func(payload []byte) {
		var a announcement
		if err := json.Unmarshal(payload, &a); err != nil {
			m.log.Warn("ignoring a malformed settings announcement", "err", err)
			return
		}
		if a.From == p.id {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), reloadTimeout)
		defer cancel()
		if err := m.Reload(ctx); err != nil {
			m.log.Error("reload settings after a change on another node", "err", err)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("share settings: %w", err)
	}
	m.peers.Store(p)
	return func() {
		m.peers.CompareAndSwap(p, nil)
		unsubscribe()
	}, nil
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
