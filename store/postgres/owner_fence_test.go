package postgres_test

import (
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

// claimEpoch is the store's gateway_claim row: the epoch the last take
// wrote and who wrote it; epoch 0 when no gateway ever claimed the store.
func claimEpoch(t *testing.T, s *postgres.Store) (epoch int64, holder string) {
	t.Helper()
	err := s.Pool().QueryRow(t.Context(), "SELECT epoch, holder FROM gateway_claim WHERE id = 1").Scan(&epoch, &holder)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ""
	}
	if err != nil {
		t.Fatalf("read gateway_claim: %v", err)
	}
	return epoch, holder
}

// TestClaimEpochPerTake: every take of the lock, the first and each one
// after a break, bumps the store's claim epoch by exactly one and names the
// session that took it; a break with nobody else in between is retaken and
// the claim is not lost.
func TestClaimEpochPerTake(t *testing.T) {
	a, b, schema := claimStores(t, 20*time.Millisecond)
	if epoch, _ := claimEpoch(t, a); epoch != 0 {
		t.Fatalf("epoch %d before any claim, want 0", epoch)
	}
	ca, err := a.Claim(t.Context())
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	defer ca.Release()
	first := lockHolder(t, a, schema)
	epoch, holder := claimEpoch(t, a)
	if epoch != 1 || !strings.Contains(holder, fmt.Sprintf("pid %d", first)) || !strings.Contains(holder, "wamux gateway") {
		t.Fatalf("after the first take: epoch %d, holder %q; want 1, naming pid %d and application wamux gateway", epoch, holder, first)
	}
	for i := range 2 {
		old := lockHolder(t, a, schema)
		terminate(t, a, old)
		var pid uint32
		testwait.For(t, "the lock taken again and its epoch written", 30*time.Second, func() bool {
			notLost(t, ca)
			pid = lockHolder(t, a, schema)
			e, _ := claimEpoch(t, a)
			return pid != 0 && pid != old && e != epoch
		})
		want := epoch + 1
		epoch, holder = claimEpoch(t, a)
		if epoch != want || !strings.Contains(holder, fmt.Sprintf("pid %d", pid)) {
			t.Fatalf("after retake %d: epoch %d, holder %q; want %d, naming pid %d", i+1, epoch, holder, want, pid)
		}
		notLost(t, ca)
	}
	if err := ca.Release(); err != nil {
		t.Fatal(err)
	}
	cb, err := b.Claim(t.Context())
	if err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	defer cb.Release()
	if got, _ := claimEpoch(t, b); got != epoch+1 {
		t.Fatalf("epoch %d after another gateway's take, want %d", got, epoch+1)
	}
}

// TestClaimLostToGatewayInGap: a gateway that starts and stops again
// while this one's lock connection is broken leaves the lock free, so this
// one takes it again; but the store was written by two gateways, and this
// one's caches and sequences may be stale. The epoch the other wrote tells:
// the claim must be lost, saying why, and let the lock go.
func TestClaimLostToGatewayInGap(t *testing.T) {
	a, b, schema := claimStores(t, 20*time.Millisecond)
	ca, err := a.Claim(t.Context())
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	defer ca.Release()
	reached, release := postgres.HoldClaimRetake(ca)
	defer release()
	terminate(t, a, lockHolder(t, a, schema))
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the claim did not notice its lock session ended")
	}
	// The ended session lets go of the lock as its backend exits.
	var cb store.Claim
	testwait.For(t, "another gateway to claim the store in the gap", 30*time.Second, func() bool {
		cb, err = b.Claim(t.Context())
		if err != nil && !errors.Is(err, store.ErrInUse) {
			t.Fatalf("claim in the gap: %v", err)
		}
		return err == nil
	})
	if err := cb.Release(); err != nil {
		t.Fatal(err)
	}
	release()
	select {
	case <-ca.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("the claim took the lock again without noticing another gateway held the store meanwhile")
	}
	t.Log(ca.Err())
	if err := ca.Err(); !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), "another gateway held the store") {
		t.Fatalf("lost claim's error: %v, want ErrInUse saying another gateway held the store", err)
	}
	testwait.For(t, "the lost claim to let go of the lock", 30*time.Second, func() bool { return lockHolder(t, a, schema) == 0 })
	cb, err = b.Claim(t.Context())
	if err != nil {
		t.Fatalf("claim after the first was lost: %v", err)
	}
	cb.Release()
}

// TestClaimOwnBumpUnanswered: a bump whose answer was lost with the
// connection leaves the epoch one past what the claim remembers, written by
// the claim itself; its next retake must take that for its own, not for
// another gateway's, and go on.
func TestClaimOwnBumpUnanswered(t *testing.T) {
	a, _, schema := claimStores(t, 20*time.Millisecond)
	ca, err := a.Claim(t.Context())
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	defer ca.Release()
	// A retake first, so the claim remembers an epoch past the first take.
	for epoch := int64(2); epoch <= 3; epoch++ {
		if epoch == 3 {
			postgres.ForgetClaimBump(ca)
		}
		old := lockHolder(t, a, schema)
		terminate(t, a, old)
		testwait.For(t, fmt.Sprintf("the lock taken again and epoch %d written", epoch), 30*time.Second, func() bool {
			notLost(t, ca)
			pid := lockHolder(t, a, schema)
			e, _ := claimEpoch(t, a)
			return pid != 0 && pid != old && e == epoch
		})
	}
	notLost(t, ca)
}

// TestClaimWithoutEpochTable: a claim never goes on unfenced. Open creates
// gateway_claim, so only a dropped table gets here: the first take fails
// and lets go of the lock; a retake loses the claim.
func TestClaimWithoutEpochTable(t *testing.T) {
	drop := func(t *testing.T, s *postgres.Store) {
		t.Helper()
		if _, err := s.Pool().Exec(t.Context(), "DROP TABLE gateway_claim"); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("first take", func(t *testing.T) {
		a, _, schema := claimStores(t, 20*time.Millisecond)
		drop(t, a)
		c, err := a.Claim(t.Context())
		if err == nil {
			c.Release()
			t.Fatal("claim without gateway_claim succeeded")
		}
		if errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), "gateway_claim") || !strings.Contains(err.Error(), "is missing") {
			t.Fatalf("claim without gateway_claim: %v, want an error saying the table is missing, not ErrInUse", err)
		}
		if pid := lockHolder(t, a, schema); pid != 0 {
			t.Fatalf("lock held by pid %d after the failed claim", pid)
		}
	})

	t.Run("retake", func(t *testing.T) {
		a, _, schema := claimStores(t, 20*time.Millisecond)
		ca, err := a.Claim(t.Context())
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		defer ca.Release()
		drop(t, a)
		terminate(t, a, lockHolder(t, a, schema))
		select {
		case <-ca.Lost():
		case <-time.After(30 * time.Second):
			t.Fatal("the claim took the lock again without its epoch table")
		}
		if err := ca.Err(); err == nil || !strings.Contains(err.Error(), "gateway_claim") {
			t.Fatalf("lost claim's error: %v, want it to name gateway_claim", err)
		}
		testwait.For(t, "the lost claim to let go of the lock", 30*time.Second, func() bool { return lockHolder(t, a, schema) == 0 })
	})
}
