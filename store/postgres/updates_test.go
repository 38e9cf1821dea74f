package postgres_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// Concurrent updates share transactions (updates.go), yet each caller
// gets its own answer: one refused for a wamid another message holds
// fails alone, the rest apply, and one whose precondition does not hold
// changes nothing.
func TestConcurrentUpdatesAnsweredEach(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	const n = 64
	msgs := make([]wamux.Message, n+1)
	for i := range msgs {
		msgs[i] = wamux.Message{ID: fmt.Sprintf("m%02d", i), AccountID: "a", BizType: "b", To: "1", Type: "text",
			Payload: []byte(`{}`), ContentHash: "h", Status: wamux.StatusSending}
	}
	msgs[n].WAMID, msgs[n].Status = "wamid.held", wamux.StatusAccepted
	if _, err := s.InsertMessages(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		var wg sync.WaitGroup
		oks, errs := make([]bool, n), make([]error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				u := store.MessageUpdate{MsgID: msgs[i].ID, From: []wamux.Status{wamux.StatusSending}, Status: wamux.StatusAccepted,
					WAMID: fmt.Sprintf("wamid.%d.%d", round, i)}
				switch {
				case i == 7:
					u.WAMID = "wamid.held"
				case i%5 == 0:
					u.From = []wamux.Status{wamux.StatusQueued}
				}
				oks[i], errs[i] = s.UpdateMessage(t.Context(), u)
			}(i)
		}
		wg.Wait()
		for i := 0; i < n; i++ {
			switch {
			case i == 7:
				if wamux.ErrorCode(errs[i]) != wamux.EConflict {
					t.Fatalf("round %d: update to a held wamid: %v, %v; want a conflict", round, oks[i], errs[i])
				}
			case i%5 == 0:
				if oks[i] || errs[i] != nil {
					t.Fatalf("round %d: update of %s whose From does not hold: %v, %v; want false, nil", round, msgs[i].ID, oks[i], errs[i])
				}
			default:
				if !oks[i] || errs[i] != nil {
					t.Fatalf("round %d: update of %s: %v, %v; want applied", round, msgs[i].ID, oks[i], errs[i])
				}
				m, err := s.GetMessage(t.Context(), msgs[i].ID)
				if err != nil || m.Status != wamux.StatusAccepted || m.WAMID != fmt.Sprintf("wamid.%d.%d", round, i) {
					t.Fatalf("round %d: stored %s: %+v, %v", round, msgs[i].ID, m, err)
				}
				// Back to sending for the next round.
				if ok, err := s.UpdateMessage(t.Context(), store.MessageUpdate{MsgID: m.ID, Status: wamux.StatusSending}); !ok || err != nil {
					t.Fatalf("reset %s: %v, %v", m.ID, ok, err)
				}
			}
		}
		if m, err := s.GetMessage(t.Context(), msgs[7].ID); err != nil || m.Status != wamux.StatusSending || m.WAMID != "" {
			t.Fatalf("round %d: the refused update changed its message: %+v, %v", round, m, err)
		}
	}
	// Closed, the store refuses updates without waiting.
	s.Close()
	if _, err := s.UpdateMessage(t.Context(), store.MessageUpdate{MsgID: msgs[1].ID, Status: wamux.StatusQueued}); wamux.ErrorCode(err) != wamux.EUnavailable {
		t.Fatalf("update after close: %v, want unavailable", err)
	}
}
