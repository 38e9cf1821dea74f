package ownership_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/wamux/wamux/ownership"
	"github.com/wamux/wamux/ownership/ownershiptest"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/postgres/pgtest"
	"github.com/wamux/wamux/store/sqlite"
)

// stores are the backends the suites run on.
var stores = map[string]func(t *testing.T) store.Store{
	"SQLite": func(t *testing.T) store.Store {
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "wamux.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	},
	"PostgreSQL": func(t *testing.T) store.Store {
		dsn := pgtest.DSN()
		if dsn == "" {
			t.Skip("WAMUX_TEST_POSTGRES is not set")
		}
		return pgtest.Open(t, dsn, "wamux_own_")
	},
}

func TestCluster(t *testing.T) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ownershiptest.Run(t, func(t *testing.T, partitions int) ownershiptest.Subject {
				st := open(t)
				c, err := ownership.NewCluster(ownership.Config{Store: st, Node: "node-a", Partitions: partitions})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return ownershiptest.Subject{Own: c, Store: st, Assign: c.Assign, Revoke: c.Revoke}
			})
		})
	}
}

func TestEmbedded(t *testing.T) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ownershiptest.Run(t, func(t *testing.T, partitions int) ownershiptest.Subject {
				st := open(t)
				claim := newBreakableClaim()
				e, err := ownership.NewEmbedded(t.Context(), ownership.Config{Store: st, Node: "node-a", Partitions: partitions}, claim)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { e.Close() })
				return ownershiptest.Subject{Own: e, Store: st, Revoke: func([]int) { loseClaim(t, e, claim) }}
			})
		})
	}
}

// loseClaim breaks claim and returns once e's watchers were told: a
// watcher joining now is told after those before it.
func loseClaim(t *testing.T, e *ownership.Embedded, claim *breakableClaim) {
	revoked := make(chan struct{})
	var once sync.Once
	stop := e.Watch(func(c ownership.Change) {
		if len(c.Revoked) > 0 {
			once.Do(func() { close(revoked) })
		}
	})
	defer stop()
	claim.lose(errors.New("another gateway took the store"))
	<-revoked
}

// breakableClaim is a store.Claim the test can break, as a PostgreSQL
// claim breaks when another process took its lock.
type breakableClaim struct {
	once sync.Once
	lost chan struct{}
	mu   sync.Mutex
	err  error
}

func newBreakableClaim() *breakableClaim { return &breakableClaim{lost: make(chan struct{})} }

func (c *breakableClaim) lose(err error) {
	c.once.Do(func() {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(c.lost)
	})
}

func (c *breakableClaim) Lost() <-chan struct{} { return c.lost }
func (c *breakableClaim) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
func (c *breakableClaim) Release() error { return nil }

// TestEmbeddedOverStoreClaim: over the store's own claim, the embedded
// ownership holds every partition at once, under epochs the store keeps.
func TestEmbeddedOverStoreClaim(t *testing.T) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			claim, err := st.(store.Owner).Claim(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer claim.Release()
			e, err := ownership.NewEmbedded(t.Context(), ownership.Config{Store: st, Partitions: 3}, claim)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			held := e.Held()
			if len(held) != 3 {
				t.Fatalf("held %+v, want all 3 partitions", held)
			}
			for _, l := range held {
				if epoch, err := st.PartitionEpoch(t.Context(), l.Partition); err != nil || epoch != l.Epoch {
					t.Fatalf("lease %+v, store epoch %d (%v)", l, epoch, err)
				}
			}
			// A second start takes them again, under newer epochs.
			again, err := ownership.NewEmbedded(context.Background(), ownership.Config{Store: st, Partitions: 3}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close()
			for i, l := range again.Held() {
				if l.Epoch != held[i].Epoch+1 {
					t.Fatalf("second start's lease %+v, first's %+v", l, held[i])
				}
			}
		})
	}
}

func TestConfigIsValidated(t *testing.T) {
	if _, err := ownership.NewCluster(ownership.Config{Node: "n", Partitions: 1}); err == nil {
		t.Fatal("a cluster without a store was built")
	}
	st := stores["SQLite"](t)
	if _, err := ownership.NewCluster(ownership.Config{Store: st, Node: "n"}); err == nil {
		t.Fatal("a cluster without partitions was built")
	}
	c, err := ownership.NewCluster(ownership.Config{Store: st, Partitions: 2})
	if err != nil {
		t.Fatalf("a cluster without a node id (the host name's) was refused: %v", err)
	}
	c.Close()
	if err := c.Assign(t.Context(), []int{0}); err == nil {
		t.Fatal("Assign after Close succeeded")
	}
}
