package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// testUpdatesIsolated: many concurrent status updates (which a group
// commit may put in one transaction), one of them refused for a wamid
// already taken; the refused one changes nothing, all others land.
func testUpdatesIsolated(t *testing.T, s store.Store) {
	const n = 40
	var msgs []wamux.Message
	for i := 0; i < n; i++ {
		msgs = append(msgs, testMessage(fmt.Sprintf("ui-%02d", i), "acc1", 0, "h"))
	}
	if _, err := s.InsertMessages(ctx(t), msgs); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "ui-00", Status: wamux.StatusAccepted, WAMID: "wamid.taken"}); err != nil || !ok {
		t.Fatalf("seed wamid: %v %v", ok, err)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 1; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			wamid := fmt.Sprintf("wamid.ui-%02d", i)
			if i == n/2 {
				wamid = "wamid.taken"
			}
			_, errs[i] = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: fmt.Sprintf("ui-%02d", i),
				From: []wamux.Status{wamux.StatusQueued}, Status: wamux.StatusAccepted, WAMID: wamid, AttemptsDelta: 1})
		}(i)
	}
	wg.Wait()
	for i := 1; i < n; i++ {
		m, err := s.GetMessage(ctx(t), fmt.Sprintf("ui-%02d", i))
		must(t, err)
		if i == n/2 {
			wantCode(t, errs[i], wamux.EConflict)
			if m.Status != wamux.StatusQueued || m.WAMID != "" || m.Attempts != 0 {
				t.Fatalf("the refused update changed the message: %+v", m)
			}
			continue
		}
		if errs[i] != nil || m.Status != wamux.StatusAccepted || m.WAMID != fmt.Sprintf("wamid.ui-%02d", i) || m.Attempts != 1 {
			t.Fatalf("update %d: err %v, message %+v", i, errs[i], m)
		}
	}
}
