package sqlite

import (
	"context"
	"database/sql"
	"time"
)

// checkpointer copies committed WAL frames back into the database file on
// a connection of its own. Left to SQLite, the commit that crosses the
// auto-checkpoint threshold does that copy (thousands of page writes
// under random inserts) while every caller of its group waits; here the
// writer only nudges this goroutine after a commit. A PASSIVE checkpoint
// never blocks the writer or readers. The writer keeps a high
// auto-checkpoint threshold as a safety net should this one fall behind.
type checkpointer struct {
	db    *sql.DB
	every time.Duration
	kick  chan struct{} // capacity 1: nudges coalesce
	stop  chan struct{}
	done  chan struct{}
}

func newCheckpointer(db *sql.DB, every time.Duration) *checkpointer {
	c := &checkpointer{db: db, every: every, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// notify asks for a checkpoint soon; it never blocks the writer.
func (c *checkpointer) notify() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		// An error (a lock held elsewhere) just means this round copied
		// less; the next nudge or the writer's safety net catches up.
		_, _ = c.db.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
		// At most one checkpoint per interval, so a busy writer's nudges
		// do not keep a second core copying pages continuously.
		t := time.NewTimer(c.every)
		select {
		case <-c.stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// close stops the goroutine and closes its connection.
func (c *checkpointer) close() error {
	close(c.stop)
	<-c.done
	return c.db.Close()
}
