package sqlite

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// numberThenFail numbers the message and then fails, so that its request
// is rolled back with the key row it inserted.
func numberThenFail(k store.StateKey, errBoom error) func(w *writeTx) error {
	return func(w *writeTx) error {
		if _, err := w.messageSeqs([]store.StateKey{k}); err != nil {
			return err
		}
		return errBoom
	}
}

// A message number learned by a request that is then rolled back must not
// be remembered: the receipts stored later would be filed under a number
// that no key row names, and no lookup by provider id would find them.
// Covered for a request rolled back to its savepoint inside a shared batch
// and for a request that is the whole transaction.
func TestRolledBackMessageNumbersAreForgotten(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	errBoom := wamux.Errorf(wamux.EConflict, "boom")
	a := store.StateKey{AccountID: "acc1", MessageID: "wamid.A"}
	b := store.StateKey{AccountID: "acc1", MessageID: "wamid.B"}

	// In a batch: the blocker holds the writer so that both requests share
	// one transaction; the first is rolled back to its savepoint.
	failInSharedBatch(t, s, numberThenFail(a, errBoom), errBoom)
	// Alone: the failure rolls back the whole transaction.
	if err := s.write(ctx, numberThenFail(b, errBoom)); !errors.Is(err, errBoom) {
		t.Fatalf("lone request: %v, want its own error", err)
	}

	for _, k := range []store.StateKey{a, b} {
		fresh, err := s.InsertReceipts(ctx, []wamux.Receipt{{MessageID: k.MessageID, AccountID: k.AccountID,
			Type: wamux.ReceiptSent, EventTime: time.UnixMilli(1000)}})
		if err != nil || !fresh[0] {
			t.Fatalf("insert %s: %v, %v", k.MessageID, fresh, err)
		}
		if err := s.PutStates(ctx, []store.MessageState{{StateKey: k, Type: wamux.ReceiptSent, EventTime: time.UnixMilli(1000)}}); err != nil {
			t.Fatal(err)
		}
		rs, err := s.ListReceipts(ctx, k.AccountID, k.MessageID)
		if err != nil || len(rs) != 1 {
			t.Fatalf("receipts of %s = %+v, %v; want the one stored", k.MessageID, rs, err)
		}
		st, err := s.GetStates(ctx, []store.StateKey{k})
		if err != nil || st[k].Type != wamux.ReceiptSent {
			t.Fatalf("state of %s = %+v, %v; want sent", k.MessageID, st, err)
		}
	}
}

// The writer's cache carries numbers from the receipts' insert to the
// states' upsert and across transactions; whatever it answers, from the
// cache, the ledger's tail or the index, must be the number in
// message_keys.
func TestCachedMessageNumbersMatchTheTable(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	var rs []wamux.Receipt
	for i := range 300 {
		rs = append(rs, wamux.Receipt{MessageID: "wamid." + string(rune('A'+i%26)) + string(rune('a'+i/26)),
			AccountID: "acc1", Type: wamux.ReceiptSent, EventTime: time.UnixMilli(int64(1000 + i))})
	}
	for start := 0; start < len(rs); start += 70 {
		if _, err := s.InsertReceipts(ctx, rs[start:min(start+70, len(rs))]); err != nil {
			t.Fatal(err)
		}
	}
	keys := make([]store.StateKey, len(rs))
	for i, r := range rs {
		keys[i] = store.StateKey{AccountID: r.AccountID, MessageID: r.MessageID}
	}
	check := func(how string, keys []store.StateKey) {
		t.Helper()
		var cached []int64
		if err := s.write(ctx, func(w *writeTx) error {
			var err error
			cached, err = w.messageSeqs(keys)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		seen := map[int64]bool{}
		for i, k := range keys {
			var seq int64
			if err := s.rdb.QueryRowContext(ctx, "SELECT seq FROM message_keys WHERE account_id = ? AND message_id = ?",
				k.AccountID, k.MessageID).Scan(&seq); err != nil {
				t.Fatalf("%s: %s: %v", how, k.MessageID, err)
			}
			if cached[i] != seq || seen[seq] {
				t.Fatalf("%s: %s: number %d, table %d (seen before: %v)", how, k.MessageID, cached[i], seq, seen[seq])
			}
			seen[seq] = true
		}
	}
	check("from the cache", keys)
	// Forgotten by the cache, the numbered messages are found in the
	// ledger's tail; a new one among them is numbered next.
	s.numbers.reset()
	check("from the ledger's tail", append(keys[:len(keys):len(keys)], store.StateKey{AccountID: "acc1", MessageID: "wamid.new"}))
	// Filed in the index and forgotten by the cache, they are looked up
	// there; a new one is numbered next.
	fileKeysNow(t, s)
	if n := s.tail.len(); n != 0 {
		t.Fatalf("the tail holds %d numbers after a fill, want 0", n)
	}
	s.numbers.reset()
	check("through message_key_index", append(keys[:len(keys):len(keys)], store.StateKey{AccountID: "acc1", MessageID: "wamid.new2"}))
	checkLedger(t, s, len(keys)+2)
}

// Readers answer by number for messages the cache or the ledger's tail
// knows and through message_key_index for the rest; every way must give
// each key its own answer, and what a reader learns must be the table's
// number.
func TestReadsByNumberAndByProviderID(t *testing.T) {
	s := openInternal(t)
	ctx := t.Context()
	types := []wamux.ReceiptType{wamux.ReceiptSent, wamux.ReceiptDelivered, wamux.ReceiptRead}
	var rs []wamux.Receipt
	var states []store.MessageState
	var keys []store.StateKey
	var asked []store.ReceiptKey
	var want []bool
	for i := range 1500 { // more than one chunk of maxKeyRows
		k := store.StateKey{AccountID: "acc" + string(rune('a'+i%3)), MessageID: "wamid.R" + strconv.Itoa(i)}
		keys = append(keys, k)
		typ := types[i%3]
		rs = append(rs, wamux.Receipt{MessageID: k.MessageID, AccountID: k.AccountID, Type: typ, EventTime: time.UnixMilli(int64(1000 + i))})
		states = append(states, store.MessageState{StateKey: k, Type: typ, EventTime: time.UnixMilli(int64(1000 + i)), ErrorCode: i})
		for _, t := range types {
			asked = append(asked, store.ReceiptKey{MessageID: k.MessageID, AccountID: k.AccountID, Type: t})
			want = append(want, t == typ)
		}
	}
	never := store.StateKey{AccountID: "acca", MessageID: "wamid.never"}
	keys = append(keys, never)
	asked = append(asked, store.ReceiptKey{MessageID: never.MessageID, AccountID: never.AccountID, Type: wamux.ReceiptSent})
	want = append(want, false)
	if _, err := s.InsertReceipts(ctx, rs); err != nil {
		t.Fatal(err)
	}
	if err := s.PutStates(ctx, states); err != nil {
		t.Fatal(err)
	}

	check := func(how string) {
		t.Helper()
		got, err := s.GetStates(ctx, keys)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(states) {
			t.Fatalf("%s: %d states, want %d", how, len(got), len(states))
		}
		for _, st := range states {
			g := got[st.StateKey]
			if g.Type != st.Type || !g.EventTime.Equal(st.EventTime) || g.ErrorCode != st.ErrorCode {
				t.Fatalf("%s: state of %v = %+v, want %+v", how, st.StateKey, g, st)
			}
		}
		// One key alone takes the single-row statement.
		one, err := s.GetStates(ctx, keys[7:8])
		if err != nil || one[keys[7]].ErrorCode != 7 || len(one) != 1 {
			t.Fatalf("%s: state of %v alone = %+v, %v", how, keys[7], one, err)
		}
		has, err := s.HasReceipts(ctx, asked)
		if err != nil {
			t.Fatal(err)
		}
		for i := range asked {
			if has[i] != want[i] {
				t.Fatalf("%s: HasReceipts(%+v) = %v, want %v", how, asked[i], has[i], want[i])
			}
		}
	}
	if n := s.numbers.len(); n < len(states) {
		t.Fatalf("the writer left %d numbers in the cache, want %d", n, len(states))
	}
	check("by number")
	s.numbers.reset()
	if n := s.tail.len(); n < len(states) {
		t.Fatalf("the tail holds %d numbers, want %d", n, len(states))
	}
	check("from the ledger's tail")
	fileKeysNow(t, s)
	s.numbers.reset()
	check("through message_key_index")
	// The reads above taught the cache again; each number must be the
	// table's.
	if n := s.numbers.len(); n < len(states) {
		t.Fatalf("the readers left %d numbers in the cache, want %d", n, len(states))
	}
	for _, k := range keys[:len(states)] {
		var seq int64
		if err := s.rdb.QueryRowContext(ctx, "SELECT seq FROM message_keys WHERE account_id = ? AND message_id = ?",
			k.AccountID, k.MessageID).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		if got, ok := s.numbers.get(s.numbers.hash(k)); !ok || got != seq {
			t.Fatalf("%v: cached %d (%v), table %d", k, got, ok, seq)
		}
	}
	check("by number again")
}

// BenchmarkStateReads: the pipeline's reads of a batch of 100 messages out
// of 100,000 with random wamids, by number (the cache knows them) and
// through message_key_index (the tail filed, the cache cleared before
// each read, outside the timer).
func BenchmarkStateReads(b *testing.B) {
	s := openInternal(b)
	ctx := b.Context()
	const messages, batch = 100_000, 100
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]store.StateKey, messages)
	states := make([]store.MessageState, messages)
	rs := make([]wamux.Receipt, messages)
	for i := range keys {
		keys[i] = store.StateKey{AccountID: "acc" + strconv.Itoa(i%10), MessageID: fmt.Sprintf("wamid.HBgL%016x%016x", rng.Uint64(), rng.Uint64())}
		rs[i] = wamux.Receipt{MessageID: keys[i].MessageID, AccountID: keys[i].AccountID, Type: wamux.ReceiptDelivered, EventTime: time.UnixMilli(int64(1000 + i))}
		states[i] = store.MessageState{StateKey: keys[i], Type: wamux.ReceiptDelivered, EventTime: rs[i].EventTime}
	}
	for start := 0; start < messages; start += 2000 {
		end := min(start+2000, messages)
		if _, err := s.InsertReceipts(ctx, rs[start:end]); err != nil {
			b.Fatal(err)
		}
		if err := s.PutStates(ctx, states[start:end]); err != nil {
			b.Fatal(err)
		}
	}
	fileKeysNow(b, s)
	pick := func() ([]store.StateKey, []store.ReceiptKey) {
		ks := make([]store.StateKey, batch)
		rks := make([]store.ReceiptKey, batch)
		for j := range ks {
			ks[j] = keys[rng.IntN(messages)]
			rks[j] = store.ReceiptKey{MessageID: ks[j].MessageID, AccountID: ks[j].AccountID, Type: wamux.ReceiptDelivered}
		}
		return ks, rks
	}
	for _, cached := range []bool{true, false} {
		name := "by-number"
		if !cached {
			name = "through-index"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				ks, rks := pick()
				if !cached {
					b.StopTimer()
					s.numbers.reset()
					b.StartTimer()
				}
				got, err := s.GetStates(ctx, ks)
				if err != nil || len(got) == 0 {
					b.Fatalf("states: %d, %v", len(got), err)
				}
				if !cached {
					b.StopTimer()
					s.numbers.reset()
					b.StartTimer()
				}
				has, err := s.HasReceipts(ctx, rks)
				if err != nil || !has[0] {
					b.Fatalf("has receipts: %v, %v", has, err)
				}
			}
			b.ReportMetric(float64(2*batch*b.N)/b.Elapsed().Seconds(), "keys/s")
		})
	}
}

// fileKeysNow makes the writer file the whole ledger tail in the index and
// waits until it has: the fill goes on a chunk after each batch.
func fileKeysNow(t testing.TB, s *Store) {
	t.Helper()
	old := s.keyFill.Swap(1)
	defer s.keyFill.Store(old)
	for i := 0; s.tail.len() > 0; i++ {
		if i == 1000 {
			t.Fatalf("the tail still holds %d numbers", s.tail.len())
		}
		if err := s.write(t.Context(), func(*writeTx) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
}

// checkLedger: the ledger numbers each of want messages once, and the
// index, once filled, maps each to the ledger's number.
func checkLedger(t testing.TB, s *Store, want int) {
	t.Helper()
	var rows, distinct, indexed, agree int
	if err := s.rdb.QueryRowContext(t.Context(), `SELECT count(*), count(DISTINCT account_id || '/' || message_id),
		(SELECT count(*) FROM message_key_index),
		(SELECT count(*) FROM message_keys mk JOIN message_key_index ix
			ON ix.account_id = mk.account_id AND ix.message_id = mk.message_id AND ix.seq = mk.seq)
		FROM message_keys`).Scan(&rows, &distinct, &indexed, &agree); err != nil {
		t.Fatal(err)
	}
	if rows != want || distinct != want {
		t.Fatalf("the ledger has %d rows for %d messages, want %d for %d", rows, distinct, want, want)
	}
	if tail := s.tail.len(); indexed+tail < want || agree != indexed {
		t.Fatalf("the index holds %d numbers (%d agree with the ledger), the tail %d; want %d in all", indexed, agree, tail, want)
	}
}

// len is how many numbers the cache holds (for tests).
func (n *numbers) len() int {
	total := 0
	for i := range n.shards {
		sh := &n.shards[i]
		sh.mu.Lock()
		total += sh.cur.n + sh.prev.n
		sh.mu.Unlock()
	}
	return total
}
