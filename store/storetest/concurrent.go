package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// testConcurrent has many writers race on overlapping keys: every shared
// msg_id and receipt must be new for exactly one of them, and nothing may
// be lost or doubled.
func testConcurrent(t *testing.T, s store.Store) {
	const (
		workers = 32
		own     = 8 // messages and receipts only this worker writes
		shared  = 4 // written by every worker, same content
		clashes = 2 // written by every worker, each with its own content
	)
	type tally struct {
		inserted, dup, conflict, newReceipts int
		sharedNew, clashInserted             map[string]int
	}
	tallies := make([]tally, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			tl := &tallies[w]
			tl.sharedNew, tl.clashInserted = map[string]int{}, map[string]int{}
			var msgs []wamux.Message
			for i := 0; i < own; i++ {
				msgs = append(msgs, testMessage(fmt.Sprintf("own-%d-%d", w, i), fmt.Sprintf("acc%d", w%4), int64(w*100+i+1), "h"))
			}
			for i := 0; i < shared; i++ {
				msgs = append(msgs, testMessage(fmt.Sprintf("shared-%d", i), "accS", 0, "same"))
			}
			for i := 0; i < clashes; i++ {
				msgs = append(msgs, testMessage(fmt.Sprintf("clash-%d", i), "accS", 0, fmt.Sprintf("worker-%d", w)))
			}
			// Half the workers send one message per call, half in one batch,
			// so single requests and batches share transactions.
			var results []store.InsertResult
			if w%2 == 0 {
				for _, m := range msgs {
					r, err := s.InsertMessages(ctx(t), []wamux.Message{m})
					if err != nil {
						errs <- err
						return
					}
					results = append(results, r...)
				}
			} else {
				r, err := s.InsertMessages(ctx(t), msgs)
				if err != nil {
					errs <- err
					return
				}
				results = r
			}
			for i, r := range results {
				switch r.Outcome {
				case store.Inserted:
					tl.inserted++
					if i >= own+shared {
						tl.clashInserted[msgs[i].ID]++
					}
				case store.Duplicate:
					tl.dup++
				case store.Conflict:
					tl.conflict++
				}
			}
			var rs []wamux.Receipt
			for i := 0; i < own; i++ {
				rs = append(rs, testReceipt(fmt.Sprintf("w-%d-%d", w, i), "acc1", wamux.ReceiptSent))
			}
			for i := 0; i < shared; i++ {
				rs = append(rs, testReceipt(fmt.Sprintf("w-shared-%d", i), "acc1", wamux.ReceiptDelivered))
			}
			news, err := s.InsertReceipts(ctx(t), rs)
			if err != nil {
				errs <- err
				return
			}
			for i, n := range news {
				if !n {
					continue
				}
				tl.newReceipts++
				if i >= own {
					tl.sharedNew[rs[i].MessageID]++
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent write failed: %v", err)
	}

	var inserted, dup, conflict, newReceipts int
	sharedNew, clashInserted := map[string]int{}, map[string]int{}
	for _, tl := range tallies {
		inserted, dup, conflict, newReceipts = inserted+tl.inserted, dup+tl.dup, conflict+tl.conflict, newReceipts+tl.newReceipts
		for k, v := range tl.sharedNew {
			sharedNew[k] += v
		}
		for k, v := range tl.clashInserted {
			clashInserted[k] += v
		}
	}
	if want := workers*own + shared + clashes; inserted != want {
		t.Fatalf("inserted = %d, want %d", inserted, want)
	}
	if want := (workers - 1) * shared; dup != want {
		t.Fatalf("duplicates = %d, want %d", dup, want)
	}
	if want := (workers - 1) * clashes; conflict != want {
		t.Fatalf("conflicts = %d, want %d", conflict, want)
	}
	if want := workers*own + shared; newReceipts != want {
		t.Fatalf("new receipts = %d, want %d", newReceipts, want)
	}
	for i := 0; i < shared; i++ {
		if n := sharedNew[fmt.Sprintf("w-shared-%d", i)]; n != 1 {
			t.Fatalf("shared receipt %d reported new %d times, want once", i, n)
		}
	}
	for i := 0; i < clashes; i++ {
		if n := clashInserted[fmt.Sprintf("clash-%d", i)]; n != 1 {
			t.Fatalf("clashing msg_id %d inserted %d times, want once", i, n)
		}
	}
	all, err := s.ListMessages(ctx(t), store.MessageFilter{Limit: 10 * workers * (own + shared + clashes)})
	must(t, err)
	if want := workers*own + shared + clashes; len(all) != want {
		t.Fatalf("stored messages = %d, want %d", len(all), want)
	}
	var keys []store.ReceiptKey
	for w := 0; w < workers; w++ {
		for i := 0; i < own; i++ {
			keys = append(keys, store.ReceiptKey{MessageID: fmt.Sprintf("w-%d-%d", w, i), AccountID: "acc1", Type: wamux.ReceiptSent})
		}
	}
	has, err := s.HasReceipts(ctx(t), keys)
	must(t, err)
	for i, h := range has {
		if !h {
			t.Fatalf("receipt %+v missing after concurrent inserts", keys[i])
		}
	}
}

// testConcurrentClientSeq has writers race for one (account_id, client_seq)
// under their own msg_ids, as two clients (or two gateways on one
// database) may: exactly one is inserted, every other one is a conflict
// naming it, and no call fails.
func testConcurrentClientSeq(t *testing.T, s store.Store) {
	const workers, rounds = 8, 10
	for round := 1; round <= rounds; round++ {
		results := make([]store.InsertResult, workers)
		errs := make([]error, workers)
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				r, err := s.InsertMessages(ctx(t), []wamux.Message{testMessage(fmt.Sprintf("r%d-w%d", round, w), "acc1", int64(round), "h")})
				if errs[w] = err; err == nil {
					results[w] = r[0]
				}
			}(w)
		}
		wg.Wait()
		winner := ""
		for w, r := range results {
			must(t, errs[w])
			if r.Outcome == store.Inserted {
				if winner != "" {
					t.Fatalf("round %d: seq inserted twice", round)
				}
				winner = fmt.Sprintf("r%d-w%d", round, w)
			}
		}
		if winner == "" {
			t.Fatalf("round %d: no writer inserted the seq", round)
		}
		for _, r := range results {
			if r.Outcome != store.Inserted {
				wantOutcome(t, r, store.Conflict, winner)
			}
		}
	}
}

// testFailuresIsolated runs requests that fail (duplicate accounts, a taken
// wamid) concurrently with requests that succeed: group commit may put them
// in one transaction, and a failure must undo only its own request.
func testFailuresIsolated(t *testing.T, s store.Store) {
	const n = 48
	var msgs []wamux.Message
	for i := 0; i < n; i++ {
		msgs = append(msgs, testMessage(fmt.Sprintf("m%d", i), "acc1", 0, "h"))
	}
	_, err := s.InsertMessages(ctx(t), msgs)
	must(t, err)

	type outcome struct {
		i   int
		err error
	}
	results := make(chan outcome, 3*n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(3)
		go func(i int) {
			defer wg.Done()
			// Pairs (2k, 2k+1) share a phone number: one of each pair wins.
			_, err := s.CreateAccount(ctx(t), testAccount(fmt.Sprintf("a%02d", i), fmt.Sprintf("p%d", i/2)))
			results <- outcome{i, err}
		}(i)
		go func(i int) {
			defer wg.Done()
			// Everyone wants wamid.x: one update wins, and the losers must
			// not keep their attempts increment either.
			_, err := s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: fmt.Sprintf("m%d", i),
				Status: wamux.StatusAccepted, WAMID: "wamid.x", AttemptsDelta: 1})
			results <- outcome{n + i, err}
		}(i)
		go func(i int) {
			defer wg.Done()
			_, err := s.InsertReceipts(ctx(t), []wamux.Receipt{testReceipt(fmt.Sprintf("r%d", i), "acc1", wamux.ReceiptSent)})
			results <- outcome{2*n + i, err}
		}(i)
	}
	wg.Wait()
	close(results)
	okAccounts := map[string]bool{}
	okUpdates := 0
	for r := range results {
		switch {
		case r.i < n:
			if r.err == nil {
				okAccounts[fmt.Sprintf("a%02d", r.i)] = true
			} else {
				wantCode(t, r.err, wamux.EConflict)
			}
		case r.i < 2*n:
			if r.err == nil {
				okUpdates++
			} else {
				wantCode(t, r.err, wamux.EConflict)
			}
		default:
			must(t, r.err)
		}
	}
	if len(okAccounts) != n/2 {
		t.Fatalf("created %d accounts, want %d (one per phone number)", len(okAccounts), n/2)
	}
	list, err := s.ListAccounts(ctx(t))
	must(t, err)
	if len(list) != n/2 {
		t.Fatalf("stored %d accounts, want %d", len(list), n/2)
	}
	for _, a := range list {
		if !okAccounts[a.ID] {
			t.Fatalf("account %s stored although its create failed", a.ID)
		}
	}
	if okUpdates != 1 {
		t.Fatalf("%d updates took the same wamid, want 1", okUpdates)
	}
	winner, err := s.GetMessageByWAMID(ctx(t), "wamid.x")
	must(t, err)
	all, err := s.ListMessages(ctx(t), store.MessageFilter{AccountID: "acc1"})
	must(t, err)
	for _, m := range all {
		won := m.ID == winner.ID
		if won != (m.Attempts == 1) || won != (m.Status == wamux.StatusAccepted) {
			t.Fatalf("message %s after failed update: status %s attempts %d (winner %s)", m.ID, m.Status, m.Attempts, winner.ID)
		}
	}
	var keys []store.ReceiptKey
	for i := 0; i < n; i++ {
		keys = append(keys, store.ReceiptKey{MessageID: fmt.Sprintf("r%d", i), AccountID: "acc1", Type: wamux.ReceiptSent})
	}
	has, err := s.HasReceipts(ctx(t), keys)
	must(t, err)
	for i, h := range has {
		if !h {
			t.Fatalf("receipt r%d lost next to failing requests", i)
		}
	}
}
