package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wamux/wamux/store"
)

// testAdminAudit: actions come back newest first with what was recorded,
// an empty field list as an empty list, a zero At stamped with the
// store's clock, and at most limit of them (the default for 0).
func testAdminAudit(t *testing.T, s store.Store) {
	if got, err := s.ListAdminActions(ctx(t), 10); err != nil || len(got) != 0 {
		t.Fatalf("empty store: %v, %v", got, err)
	}
	at := time.UnixMilli(1_750_000_000_123).UTC()
	first := store.AdminAction{At: at, KeyID: "ab12cd34", Route: "PATCH /v1/accounts/{id}", Target: "acc1",
		Fields: []string{"base_url", "access_token"}}
	must(t, s.AddAdminAction(ctx(t), first))
	before := time.Now().Add(-time.Second)
	must(t, s.AddAdminAction(ctx(t), store.AdminAction{KeyID: "ef56ab78", Route: "PATCH /v1/config", Fields: nil}))
	got, err := s.ListAdminActions(ctx(t), 10)
	must(t, err)
	if len(got) != 2 {
		t.Fatalf("%d actions, want 2", len(got))
	}
	second, old := got[0], got[1]
	if old.KeyID != first.KeyID || old.Route != first.Route || old.Target != first.Target ||
		!slices.Equal(old.Fields, first.Fields) || !old.At.Equal(at) || old.ID == 0 {
		t.Errorf("first action read back as %+v, want %+v", old, first)
	}
	wantUTC(t, "At", old.At)
	if second.KeyID != "ef56ab78" || second.Route != "PATCH /v1/config" || second.Target != "" ||
		second.Fields == nil || len(second.Fields) != 0 || second.ID <= old.ID {
		t.Errorf("second action read back as %+v", second)
	}
	if second.At.Before(before) || second.At.After(time.Now().Add(time.Second)) {
		t.Errorf("a zero At was stamped %v, want about now", second.At)
	}
	for i := range 5 {
		must(t, s.AddAdminAction(ctx(t), store.AdminAction{At: at, KeyID: "k", Route: "POST /v1/accounts", Target: fmt.Sprint("acc", i)}))
	}
	got, err = s.ListAdminActions(ctx(t), 3)
	must(t, err)
	if len(got) != 3 || got[0].Target != "acc4" || got[2].Target != "acc2" {
		t.Errorf("limit 3: %+v, want acc4, acc3, acc2 (newest first, equal At ordered by insertion)", got)
	}
	got, err = s.ListAdminActions(ctx(t), 0)
	must(t, err)
	if len(got) != 7 {
		t.Errorf("limit 0 (the default): %d actions, want all 7", len(got))
	}
}
