package receipts

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wamux/wamux"
)

func newTestLRU(t *testing.T, cfg LRUConfig) *LRU {
	t.Helper()
	l, err := NewLRU(cfg)
	if err != nil {
		t.Fatalf("NewLRU(%+v): %v", cfg, err)
	}
	return l
}

func id(msg string) ReceiptID { return ReceiptID{MessageID: msg, Type: wamux.ReceiptDelivered} }

func TestLRURepeatsAreSeen(t *testing.T) {
	l := newTestLRU(t, LRUConfig{})
	if l.Seen("acc", id("m1")) {
		t.Fatal("first sight reported as seen")
	}
	if !l.Seen("acc", id("m1")) {
		t.Fatal("repeat not reported as seen")
	}
	if l.Seen("acc", ReceiptID{MessageID: "m1", Type: wamux.ReceiptRead}) {
		t.Fatal("another type of the same message reported as seen")
	}
	if l.Seen("acc", id("m2")) {
		t.Fatal("another message reported as seen")
	}
}

// TestLRUEvictsLeastRecent shows both the capacity and that a hit refreshes
// a key: a FIFO of the same size would evict m1 where the LRU evicts m2.
func TestLRUEvictsLeastRecent(t *testing.T) {
	l := newTestLRU(t, LRUConfig{PerAccount: 3})
	for _, m := range []string{"m1", "m2", "m3"} {
		l.Seen("acc", id(m))
	}
	steps := []struct {
		msg  string
		want bool
	}{
		{"m1", true},  // refreshes m1: m2 m3 m1
		{"m4", false}, // evicts m2: m3 m1 m4
		{"m1", true},  // m3 m4 m1
		{"m3", true},  // m4 m1 m3
		{"m2", false}, // evicted before; evicts m4: m1 m3 m2
		{"m4", false},
	}
	for i, s := range steps {
		if got := l.Seen("acc", id(s.msg)); got != s.want {
			t.Fatalf("step %d: Seen(%s) = %v, want %v", i, s.msg, got, s.want)
		}
	}
}

func TestLRUDefaultCapacity(t *testing.T) {
	l := newTestLRU(t, LRUConfig{})
	for i := range LRUPerAccountDefault {
		l.Seen("acc", id(fmt.Sprint(i)))
	}
	if !l.Seen("acc", id("0")) {
		t.Fatalf("key 0 evicted within the default capacity %d", LRUPerAccountDefault)
	}
	// 0 is now the most recent; one more key evicts 1, the oldest.
	l.Seen("acc", id("new"))
	if l.Seen("acc", id("1")) {
		t.Fatal("oldest key kept beyond the default capacity")
	}
}

func TestLRUAccountsIndependent(t *testing.T) {
	l := newTestLRU(t, LRUConfig{PerAccount: 2})
	if l.Seen("a", id("m1")) || l.Seen("b", id("m1")) {
		t.Fatal("first sight in each account reported as seen")
	}
	// Filling b must not evict anything of a.
	for _, m := range []string{"m2", "m3", "m4"} {
		l.Seen("b", id(m))
	}
	if !l.Seen("a", id("m1")) {
		t.Fatal("account a lost its key to account b's traffic")
	}
	if l.Seen("b", id("m1")) {
		t.Fatal("account b kept m1 beyond its capacity")
	}
}

// TestLRUAccountBound shows the memory bound: past Accounts, the account
// used least recently forgets everything.
func TestLRUAccountBound(t *testing.T) {
	l := newTestLRU(t, LRUConfig{PerAccount: 10, Accounts: 2})
	l.Seen("a", id("m1"))
	l.Seen("b", id("m1"))
	l.Seen("a", id("m2")) // a is now more recent than b
	l.Seen("c", id("m1")) // evicts b
	if !l.Seen("a", id("m1")) {
		t.Fatal("account a lost its cache though it was used recently")
	}
	if l.Seen("b", id("m1")) {
		t.Fatal("account b kept its cache beyond the account bound")
	}
}

func TestLRUConfigValidation(t *testing.T) {
	for _, cfg := range []LRUConfig{{PerAccount: -1}, {Accounts: -1}} {
		if _, err := NewLRU(cfg); err == nil {
			t.Errorf("NewLRU(%+v) accepted a negative size", cfg)
		}
	}
}

// TestLRUConcurrentFirstSight races goroutines over the same keys: each key
// must be new to exactly one of them.
func TestLRUConcurrentFirstSight(t *testing.T) {
	l := newTestLRU(t, LRUConfig{PerAccount: 1000, Accounts: 4})
	const goroutines, keys = 8, 200
	var fresh [keys]atomic.Int32
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range keys {
				k := (i + g*7) % keys
				if !l.Seen(fmt.Sprint("acc", k%3), id(fmt.Sprint(k))) {
					fresh[k].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for k := range fresh {
		if n := fresh[k].Load(); n != 1 {
			t.Errorf("key %d new to %d goroutines, want 1", k, n)
		}
	}
}
