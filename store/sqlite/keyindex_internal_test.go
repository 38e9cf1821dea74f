package sqlite

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// numberAll numbers keys in one write and returns their numbers.
func numberAll(t *testing.T, s *Store, keys []store.StateKey) []int64 {
	t.Helper()
	var got []int64
	if err := s.write(t.Context(), func(w *writeTx) error {
		var err error
		got, err = w.messageSeqs(keys)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// A message keeps its one number whatever the store remembers of it: the
// numbers handed out between two fills of the index live in memory only,
// so they must come back when the store opens again (as after a crash),
// and a second process on the same file must see the ones the first
// appended since its own last write. Otherwise a message gets two
// numbers, and its receipts and state split between them.
func TestMessageNumbersAcrossFillsRestartsAndProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.db")
	ctx := t.Context()
	open := func() *Store {
		s, err := Open(ctx, path, Options{KeyIndexFill: 64, keyFillChunk: 16})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		filterReady(t, s)
		return s
	}
	key := func(i int) store.StateKey {
		return store.StateKey{AccountID: "acc" + strconv.Itoa(i%3), MessageID: "wamid.K" + strconv.Itoa(i*7919%1000)}
	}
	const n = 500
	keys := make([]store.StateKey, n)
	for i := range keys {
		keys[i] = key(i)
	}
	a := open()
	want := map[store.StateKey]int64{}
	// A fill starts every 64 numbers and files 16 per write, so numbers
	// are looked up and handed out while one is half done.
	for start := 0; start < n; start += 30 {
		var rs []wamux.Receipt
		for _, k := range keys[start:min(start+30, n)] {
			rs = append(rs, wamux.Receipt{MessageID: k.MessageID, AccountID: k.AccountID, Type: wamux.ReceiptSent, EventTime: time.UnixMilli(1000)})
		}
		if _, err := a.InsertReceipts(ctx, rs); err != nil {
			t.Fatal(err)
		}
	}
	for i, v := range numberAll(t, a, keys) {
		want[keys[i]] = v
	}
	upto, _ := a.tail.bounds()
	if tail := a.tail.len(); upto == 0 || tail == 0 {
		t.Fatalf("after %d messages: index up to %d, tail %d; the test needs both filled and unfilled numbers", n, upto, tail)
	}
	checkLedger(t, a, n)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	// Opened again: the tail comes back from the ledger.
	a = open()
	if upto2, _ := a.tail.bounds(); upto2 != upto || a.tail.len() == 0 {
		t.Fatalf("reopened: index up to %d (was %d), tail %d", upto2, upto, a.tail.len())
	}
	for i, v := range numberAll(t, a, keys) {
		if v != want[keys[i]] {
			t.Fatalf("reopened: %v numbered %d, was %d", keys[i], v, want[keys[i]])
		}
	}
	for _, k := range keys[:5] {
		rs, err := a.ListReceipts(ctx, k.AccountID, k.MessageID)
		if err != nil || len(rs) != 1 {
			t.Fatalf("reopened: receipts of %v = %+v, %v", k, rs, err)
		}
	}
	checkLedger(t, a, n)

	// A second process: each numbers a message the other numbered since
	// its own last write, and must find that number.
	b := open()
	x := store.StateKey{AccountID: "acc1", MessageID: "wamid.X"}
	y := store.StateKey{AccountID: "acc1", MessageID: "wamid.Y"}
	ax := numberAll(t, a, []store.StateKey{x})[0]
	bx := numberAll(t, b, []store.StateKey{x, y})
	ay := numberAll(t, a, []store.StateKey{y})[0]
	if bx[0] != ax || bx[1] != ay {
		t.Fatalf("x numbered %d by one process and %d by the other; y %d and %d", ax, bx[0], bx[1], ay)
	}
	// Both fill the index with what their tails hold; the index agrees
	// with the ledger.
	fileKeysNow(t, a)
	fileKeysNow(t, b)
	checkLedger(t, a, n+2)
	checkLedger(t, b, n+2)
	a.numbers.reset()
	for i, v := range numberAll(t, a, keys) {
		if v != want[keys[i]] {
			t.Fatalf("after the fills: %v numbered %d, was %d", keys[i], v, want[keys[i]])
		}
	}
}

// A fill whose tail lacks a ledger row of its range (a bug elsewhere,
// never expected) must not move the index's bound past that number: it
// files the range from the ledger, and the message keeps its number.
func TestFillCoversLedgerRowsTheTailLacks(t *testing.T) {
	s := openInternal(t)
	keys := make([]store.StateKey, 50)
	for i := range keys {
		keys[i] = store.StateKey{AccountID: "acc1", MessageID: "wamid.F" + strconv.Itoa(i)}
	}
	want := numberAll(t, s, keys)
	s.tail.mu.Lock()
	delete(s.tail.m, s.numbers.hash(keys[7]))
	s.tail.mu.Unlock()
	fileKeysNow(t, s)
	checkLedger(t, s, len(keys))
	s.numbers.reset()
	if got := numberAll(t, s, keys[7:8]); got[0] != want[7] {
		t.Fatalf("after the fill %v is numbered %d, was %d", keys[7], got[0], want[7])
	}
}

// The writer trusts the filter: a message it says the index lacks is
// numbered without a lookup. Emptied on purpose, the filter makes a filed
// message get a second number; that is why every message filed, and every
// one in the index when the store opens, must be in it (the test above
// checks both by numbering filed messages again).
func TestKeyFilterSparesTheLookup(t *testing.T) {
	s := openInternal(t)
	k := store.StateKey{AccountID: "acc1", MessageID: "wamid.Q"}
	first := numberAll(t, s, []store.StateKey{k})[0]
	fileKeysNow(t, s)
	s.numbers.reset()
	if got := numberAll(t, s, []store.StateKey{k})[0]; got != first {
		t.Fatalf("filed and forgotten by the cache, %v is numbered %d; it is %d", k, got, first)
	}
	s.numbers.reset()
	if !s.filter.absent(s.numbers.hash(store.StateKey{AccountID: "acc1", MessageID: "wamid.R"})) {
		t.Fatal("the filter does not say the index lacks a message never numbered")
	}
	for i := range s.filter.words {
		s.filter.words[i].Store(0)
	}
	// Before the scan of the index is done, it is not asked.
	s.filter.ready.Store(false)
	if got := numberAll(t, s, []store.StateKey{k})[0]; got != first {
		t.Fatalf("with the filter not loaded, %v is numbered %d; it is %d", k, got, first)
	}
	s.numbers.reset()
	s.filter.ready.Store(true)
	if got := numberAll(t, s, []store.StateKey{k})[0]; got == first {
		t.Fatalf("the writer looked %v up although the filter said the index lacks it", k)
	}
}

// The scan that loads the filter reads the index a page at a time, after
// the last key of the page before: every message filed must come through,
// whatever the page size, including keys that share an account and keys
// that sort across accounts.
func TestKeyFilterLoadsEveryPage(t *testing.T) {
	s := openInternal(t)
	keys := make([]store.StateKey, 300)
	for i := range keys {
		keys[i] = store.StateKey{AccountID: "acc" + strconv.Itoa(i%4), MessageID: "wamid.P" + strconv.Itoa(i*7919%1000)}
	}
	numberAll(t, s, keys)
	fileKeysNow(t, s)
	for _, page := range []int{1, 7, 64, 1000} {
		s.filter = newKeyFilter(0)
		s.loadKeyFilter(t.Context(), page)
		if !s.filter.ready.Load() {
			t.Fatalf("page %d: the filter did not load", page)
		}
		for _, k := range keys {
			if s.filter.absent(s.numbers.hash(k)) {
				t.Fatalf("page %d: the filter misses %v, which the index holds", page, k)
			}
		}
	}
}
