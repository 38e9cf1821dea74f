package storetest

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

func testAccount(id, phone string) wamux.Account {
	return wamux.Account{
		ID: id, PhoneNumberID: phone, AccessToken: "token-" + id, BaseURL: "http://sim.local",
		RatePerSec: 80.5, Burst: 20, State: wamux.AccountActive,
	}
}

func sameAccount(a, b wamux.Account) bool {
	return a.ID == b.ID && a.PhoneNumberID == b.PhoneNumberID && a.AccessToken == b.AccessToken &&
		a.BaseURL == b.BaseURL && a.RatePerSec == b.RatePerSec && a.Burst == b.Burst && a.State == b.State &&
		a.CooldownUntil.Equal(b.CooldownUntil) && a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt)
}

func testAccounts(t *testing.T, newStore NewStore) {
	t.Run("CreateGet", func(t *testing.T) {
		s := newStore(t)
		in := testAccount("acc1", "1001")
		created, err := s.CreateAccount(ctx(t), in)
		must(t, err)
		wantUTC(t, "CreatedAt", created.CreatedAt)
		wantUTC(t, "UpdatedAt", created.UpdatedAt)
		got, err := s.GetAccount(ctx(t), "acc1")
		must(t, err)
		if !sameAccount(got, created) {
			t.Fatalf("GetAccount = %+v, want %+v", got, created)
		}
		if got.AccessToken != "token-acc1" || got.RatePerSec != 80.5 || got.Burst != 20 || got.BaseURL != "http://sim.local" {
			t.Fatalf("fields not stored: %+v", got)
		}
		if !got.CooldownUntil.IsZero() {
			t.Fatalf("CooldownUntil = %v, want zero", got.CooldownUntil)
		}
		byPhone, err := s.GetAccountByPhoneNumberID(ctx(t), "1001")
		must(t, err)
		if !sameAccount(byPhone, created) {
			t.Fatalf("GetAccountByPhoneNumberID = %+v, want %+v", byPhone, created)
		}
	})
	t.Run("NotFound", func(t *testing.T) {
		s := newStore(t)
		_, err := s.CreateAccount(ctx(t), testAccount("acc1", "1001"))
		must(t, err)
		_, err = s.GetAccount(ctx(t), "nope")
		wantCode(t, err, wamux.ENotFound)
		_, err = s.GetAccountByPhoneNumberID(ctx(t), "acc1") // an id is not a phone number id
		wantCode(t, err, wamux.ENotFound)
		burst := 3
		_, err = s.UpdateAccount(ctx(t), "nope", store.AccountPatch{Burst: &burst})
		wantCode(t, err, wamux.ENotFound)
	})
	t.Run("Conflict", func(t *testing.T) {
		s := newStore(t)
		first, err := s.CreateAccount(ctx(t), testAccount("acc1", "1001"))
		must(t, err)
		_, err = s.CreateAccount(ctx(t), testAccount("acc1", "2002"))
		wantCode(t, err, wamux.EConflict)
		_, err = s.CreateAccount(ctx(t), testAccount("acc2", "1001"))
		wantCode(t, err, wamux.EConflict)
		list, err := s.ListAccounts(ctx(t))
		must(t, err)
		if len(list) != 1 || !sameAccount(list[0], first) {
			t.Fatalf("after conflicts accounts = %+v, want only the first", list)
		}
		_, err = s.GetAccountByPhoneNumberID(ctx(t), "2002")
		wantCode(t, err, wamux.ENotFound)
	})
	t.Run("Invalid", func(t *testing.T) {
		s := newStore(t)
		_, err := s.CreateAccount(ctx(t), wamux.Account{PhoneNumberID: "1"})
		wantCode(t, err, wamux.EInvalid)
		bad := testAccount("acc1", "1001")
		bad.State = "sleeping"
		_, err = s.CreateAccount(ctx(t), bad)
		wantCode(t, err, wamux.EInvalid)
		// NaN is not a rate: no comparison rejects it as negative, and the
		// backends disagreed (SQLite failed as internal, PostgreSQL kept it).
		bad = testAccount("acc1", "1001")
		bad.RatePerSec = math.NaN()
		_, err = s.CreateAccount(ctx(t), bad)
		wantCode(t, err, wamux.EInvalid)
		_, err = s.GetAccount(ctx(t), "acc1")
		wantCode(t, err, wamux.ENotFound)
	})
	t.Run("ListOrdered", func(t *testing.T) {
		s := newStore(t)
		for _, id := range []string{"c", "a", "b"} {
			_, err := s.CreateAccount(ctx(t), testAccount(id, "p-"+id))
			must(t, err)
		}
		list, err := s.ListAccounts(ctx(t))
		must(t, err)
		if len(list) != 3 || list[0].ID != "a" || list[1].ID != "b" || list[2].ID != "c" {
			t.Fatalf("ListAccounts = %v, want a, b, c", list)
		}
		if list[1].PhoneNumberID != "p-b" || list[1].AccessToken != "token-b" {
			t.Fatalf("listed account fields = %+v", list[1])
		}
		// By id means by its bytes (Go's string order, SQLite's BINARY),
		// not by a database's linguistic collation, which puts "B" after
		// "a" and ignores the "-" of "a-c".
		for _, id := range []string{"B", "a-c", "ä", "ab"} {
			_, err := s.CreateAccount(ctx(t), testAccount(id, "p-"+id))
			must(t, err)
		}
		list, err = s.ListAccounts(ctx(t))
		must(t, err)
		var ids []string
		for _, a := range list {
			ids = append(ids, a.ID)
		}
		if want := "[B a a-c ab b c ä]"; fmt.Sprint(ids) != want {
			t.Fatalf("ListAccounts = %v, want %s (byte order)", ids, want)
		}
	})
	t.Run("Update", func(t *testing.T) {
		s := newStore(t)
		created, err := s.CreateAccount(ctx(t), testAccount("acc1", "1001"))
		must(t, err)
		nextMilli(t)
		rate, state := 10.25, wamux.AccountCooldown
		until := time.Date(2026, 5, 1, 10, 0, 0, 123_000_000, time.UTC)
		got, err := s.UpdateAccount(ctx(t), "acc1", store.AccountPatch{RatePerSec: &rate, State: &state, CooldownUntil: &until})
		must(t, err)
		if got.RatePerSec != 10.25 || got.State != wamux.AccountCooldown || !got.CooldownUntil.Equal(until) {
			t.Fatalf("patched = %+v", got)
		}
		if got.Burst != 20 || got.AccessToken != "token-acc1" || got.BaseURL != "http://sim.local" || got.PhoneNumberID != "1001" {
			t.Fatalf("nil patch fields changed: %+v", got)
		}
		if !got.CreatedAt.Equal(created.CreatedAt) || !got.UpdatedAt.After(created.UpdatedAt) {
			t.Fatalf("stamps: created %v→%v updated %v→%v", created.CreatedAt, got.CreatedAt, created.UpdatedAt, got.UpdatedAt)
		}
		wantUTC(t, "CooldownUntil", got.CooldownUntil)
		stored, err := s.GetAccount(ctx(t), "acc1")
		must(t, err)
		if !sameAccount(stored, got) {
			t.Fatalf("stored %+v, update returned %+v", stored, got)
		}
		token, base, burst := "new-token", "http://other", 0
		zero := time.Time{}
		got, err = s.UpdateAccount(ctx(t), "acc1", store.AccountPatch{AccessToken: &token, BaseURL: &base, Burst: &burst, CooldownUntil: &zero})
		must(t, err)
		if got.AccessToken != "new-token" || got.BaseURL != "http://other" || got.Burst != 0 || !got.CooldownUntil.IsZero() || got.RatePerSec != 10.25 {
			t.Fatalf("second patch = %+v", got)
		}
		bad := wamux.AccountState("asleep")
		_, err = s.UpdateAccount(ctx(t), "acc1", store.AccountPatch{State: &bad})
		wantCode(t, err, wamux.EInvalid)
		// A NaN rate is refused, not stored (PostgreSQL did) nor silently
		// skipped while reporting success (SQLite binds NaN as NULL, which
		// COALESCE took for "unchanged").
		nan := math.NaN()
		_, err = s.UpdateAccount(ctx(t), "acc1", store.AccountPatch{RatePerSec: &nan})
		wantCode(t, err, wamux.EInvalid)
		if stored, err := s.GetAccount(ctx(t), "acc1"); err != nil || stored.RatePerSec != 10.25 {
			t.Fatalf("after a refused NaN patch rate = %v (%v), want 10.25", stored.RatePerSec, err)
		}
	})
}
