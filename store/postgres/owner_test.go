package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/postgres"
)

// claimStores opens two stores on one fresh schema, as two gateway
// processes pointed at one URL would, checking their claims every check.
func claimStores(t *testing.T, check time.Duration) (a, b *postgres.Store, schema string) {
	t.Helper()
	first := newStore(t) // owns the schema and its cleanup
	if err := first.Pool().QueryRow(t.Context(), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	open := func() *postgres.Store {
		s, err := postgres.Open(t.Context(), testDSN(t), postgres.Options{Schema: schema, OwnerCheck: check})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return open(), open(), schema
}

// lockHolder is the backend holding schema's gateway lock, 0 for none.
func lockHolder(t *testing.T, s *postgres.Store, schema string) uint32 {
	t.Helper()
	key := uint64(postgres.OwnerLockKey(schema))
	var pid uint32
	err := s.Pool().QueryRow(t.Context(), `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND objsubid = 1 AND classid = $1::bigint::oid AND objid = $2::bigint::oid
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
		int64(key>>32), int64(key&0xffffffff)).Scan(&pid)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func terminate(t *testing.T, s *postgres.Store, pid uint32) {
	t.Helper()
	if _, err := s.Pool().Exec(t.Context(), "SELECT pg_terminate_backend($1)", int64(pid)); err != nil {
		t.Fatal(err)
	}
}

func notLost(t *testing.T, c store.Claim) {
	t.Helper()
	select {
	case <-c.Lost():
		t.Fatalf("claim lost: %v", c.Err())
	default:
	}
}

// TestClaimOneGatewayPerSchema: of two stores on one schema, only one can
// claim it; the other is refused with ErrInUse naming the schema and the
// holder, and succeeds once the first released. Another schema of the
// same database is not affected.
func TestClaimOneGatewayPerSchema(t *testing.T) {
	a, b, schema := claimStores(t, 0)
	ca, err := a.Claim(t.Context())
	if err != nil {
		t.Fatalf("first claim: %v", err)
	}
	defer ca.Release()
	pid := lockHolder(t, a, schema)
	_, err = b.Claim(t.Context())
	if !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), "schema "+schema) ||
		!strings.Contains(err.Error(), fmt.Sprintf("pid %d", pid)) {
		t.Fatalf("second claim: %v, want ErrInUse naming schema %s and holder pid %d", err, schema, pid)
	}
	other, err := newStore(t).Claim(t.Context())
	if err != nil {
		t.Fatalf("claim on another schema: %v", err)
	}
	defer other.Release()
	if err := ca.Release(); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := ca.Release(); err != nil {
		t.Fatalf("second release: %v", err)
	}
	cb, err := b.Claim(t.Context())
	if err != nil {
		t.Fatalf("claim after the first released: %v", err)
	}
	notLost(t, cb)
	cb.Release()
	if pid := lockHolder(t, a, schema); pid != 0 {
		t.Fatalf("lock still held by pid %d after release", pid)
	}
}

// TestClaimRetakenAfterKill: when the lock connection is killed while no
// one else wants the lock, the claim notices and takes it again on a new
// connection, and still keeps other stores out.
func TestClaimRetakenAfterKill(t *testing.T) {
	a, b, schema := claimStores(t, 20*time.Millisecond)
	ca, err := a.Claim(t.Context())
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	defer ca.Release()
	old := lockHolder(t, a, schema)
	terminate(t, a, old)
	testwait.For(t, "the lock taken again", 30*time.Second, func() bool {
		pid := lockHolder(t, a, schema)
		return pid != 0 && pid != old
	})
	notLost(t, ca)
	if _, err := b.Claim(t.Context()); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("claim while the first holds it again: %v, want ErrInUse", err)
	}
	notLost(t, ca)
}

// waitingForLock connects another session and has it wait for schema's
// gateway lock, so it gets the lock the moment its holder lets go, before
// a claim can take it again. It returns the session's backend pid and a
// channel that reports when it got the lock.
func waitingForLock(t *testing.T, s *postgres.Store, schema string) (uint32, <-chan error) {
	t.Helper()
	other, err := pgx.Connect(t.Context(), testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	var otherPID uint32
	if err := other.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&otherPID); err != nil {
		t.Fatal(err)
	}
	locked := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := other.Exec(context.Background(), "SELECT pg_advisory_lock($1)", postgres.OwnerLockKey(schema))
		locked <- err
	}()
	t.Cleanup(func() {
		// Ends the wait too, should the lock never have come free
		// (t.Context is done by now).
		_, _ = s.Pool().Exec(context.Background(), "SELECT pg_terminate_backend($1)", int64(otherPID))
		<-done
		other.Close(context.Background())
	})
	testwait.For(t, "the other session to wait for the lock", 30*time.Second, func() bool {
		var waiting bool
		err := s.Pool().QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE locktype = 'advisory' AND pid = $1 AND NOT granted)`, int64(otherPID)).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		return waiting
	})
	return otherPID, locked
}

// TestClaimLostToAnother: when the lock connection is killed and another
// process takes the lock before the claim could take it again, the claim
// is lost: Lost closes and Err says why.
func TestClaimLostToAnother(t *testing.T) {
	a, _, schema := claimStores(t, 20*time.Millisecond)
	ca, err := a.Claim(t.Context())
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	defer ca.Release()
	old := lockHolder(t, a, schema)
	otherPID, locked := waitingForLock(t, a, schema)
	terminate(t, a, old)
	if err := <-locked; err != nil {
		t.Fatalf("other session's lock: %v", err)
	}
	select {
	case <-ca.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("the claim did not notice it lost the lock")
	}
	if err := ca.Err(); !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", otherPID)) {
		t.Fatalf("lost claim's error: %v, want ErrInUse naming pid %d", err, otherPID)
	}
}

// TestClaimLossNoticedWithoutCheck: a lock session the server ends is
// noticed at once, not at the next periodic check: with the check an hour
// away, the claim still reports the lock lost to another process, and
// takes it again when no one else wanted it. Between the server ending the
// session and the claim noticing, a second gateway could have started and
// sent the same messages as this one.
func TestClaimLossNoticedWithoutCheck(t *testing.T) {
	// Far below the check interval: only noticing the break at once passes.
	const noticeWithin = 30 * time.Second

	t.Run("lost", func(t *testing.T) {
		a, _, schema := claimStores(t, time.Hour)
		ca, err := a.Claim(t.Context())
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		defer ca.Release()
		old := lockHolder(t, a, schema)
		otherPID, locked := waitingForLock(t, a, schema)
		terminate(t, a, old)
		if err := <-locked; err != nil {
			t.Fatalf("other session's lock: %v", err)
		}
		select {
		case <-ca.Lost():
		case <-time.After(noticeWithin):
			t.Fatal("the claim did not notice that its lock session ended")
		}
		if err := ca.Err(); !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", otherPID)) {
			t.Fatalf("lost claim's error: %v, want ErrInUse naming pid %d", err, otherPID)
		}
	})

	t.Run("retaken", func(t *testing.T) {
		a, b, schema := claimStores(t, time.Hour)
		ca, err := a.Claim(t.Context())
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		defer ca.Release()
		old := lockHolder(t, a, schema)
		terminate(t, a, old)
		testwait.For(t, "the claim to take its lock again after its session ended", noticeWithin, func() bool {
			pid := lockHolder(t, a, schema)
			return pid != 0 && pid != old
		})
		notLost(t, ca)
		if _, err := b.Claim(t.Context()); !errors.Is(err, store.ErrInUse) {
			t.Fatalf("claim while the first holds it again: %v, want ErrInUse", err)
		}
	})
}

// TestClaimPingsBetweenWaits: the lock connection waits in a read and
// gives way to a ping every check; the read it left must leave the
// connection usable, so pings keep coming from the same session and the
// lock is never taken again.
func TestClaimPingsBetweenWaits(t *testing.T) {
	a, _, schema := claimStores(t, 10*time.Millisecond)
	ca, err := a.Claim(t.Context())
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	defer ca.Release()
	pid := lockHolder(t, a, schema)
	pings := map[time.Time]bool{}
	testwait.For(t, "three pings on the lock session", 30*time.Second, func() bool {
		var started time.Time
		err := a.Pool().QueryRow(t.Context(), `SELECT query_start FROM pg_stat_activity
			WHERE pid = $1 AND query = '-- ping'`, int64(pid)).Scan(&started)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if err == nil {
			pings[started] = true
		}
		return len(pings) >= 3
	})
	if got := lockHolder(t, a, schema); got != pid {
		t.Fatalf("lock holder %d, want the first session %d still", got, pid)
	}
	notLost(t, ca)
}
