package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

func testInbound(t *testing.T, newStore NewStore) {
	t.Run("ListPages", func(t *testing.T) { testListInboundPages(t, newStore(t)) })
	t.Run("ListFilters", func(t *testing.T) { testListInboundFilters(t, newStore(t)) })
	t.Run("Get", func(t *testing.T) { testGetInbound(t, newStore(t)) })
	t.Run("Last", func(t *testing.T) { testLastInbound(t, newStore(t)) })
	t.Run("Prune", func(t *testing.T) { testPruneInbound(t, newStore(t)) })
}

// inboundAt is a message of account from customer sent at sec (Unix
// seconds), with event data naming it.
func inboundAt(account, from, wamid string, sec int64) store.InboundMessage {
	return store.InboundMessage{AccountID: account, WAMID: wamid, Type: "text", From: from,
		SentAt: time.Unix(sec, 0).UTC(), ReceivedAt: time.Unix(sec+1, 0).UTC(),
		Data: fmt.Appendf(nil, `{"account_id":%q,"wamid":%q,"text":{"body":"b"}}`, account, wamid)}
}

// listAllInbound reads every page of f, checking each page's size.
func listAllInbound(t *testing.T, s store.Store, f store.InboundFilter) []store.InboundMessage {
	t.Helper()
	var out []store.InboundMessage
	for range 100 {
		page, next, err := s.ListInbound(ctx(t), f)
		must(t, err)
		if len(page) > f.Limit || (next != "" && len(page) != f.Limit) {
			t.Fatalf("page of %d with next %q at limit %d", len(page), next, f.Limit)
		}
		out = append(out, page...)
		if next == "" {
			return out
		}
		f.After = next
	}
	t.Fatal("paging does not end")
	return nil
}

func wamids(ms []store.InboundMessage) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.WAMID
	}
	return out
}

// ListInbound pages newest first (ties by wamid, descending), returns what
// was stored, and a message stored between pages that sorts after the
// cursor shows up on a later page while none repeats.
func testListInboundPages(t *testing.T, s store.Store) {
	_, err := s.AddInboundMessages(ctx(t), []store.InboundMessage{
		inboundAt("a", "c1", "w1", 100), inboundAt("a", "c1", "w3", 300), inboundAt("a", "c1", "w2b", 200),
		inboundAt("a", "c1", "w2a", 200), inboundAt("a", "c1", "w4", 400), inboundAt("a", "c1", "w5", 500),
	})
	must(t, err)
	page, next, err := s.ListInbound(ctx(t), store.InboundFilter{AccountID: "a", From: "c1", Limit: 2})
	must(t, err)
	if got := wamids(page); !slices.Equal(got, []string{"w5", "w4"}) || next == "" {
		t.Fatalf("first page %v next %q, want [w5 w4] and a cursor", got, next)
	}
	want := inboundAt("a", "c1", "w5", 500)
	if m := page[0]; m.AccountID != "a" || m.From != "c1" || m.Type != "text" || !m.SentAt.Equal(want.SentAt) ||
		!m.ReceivedAt.Equal(want.ReceivedAt) || string(m.Data) != string(want.Data) {
		t.Fatalf("stored %+v, want %+v", m, want)
	}
	wantUTC(t, "SentAt", page[0].SentAt)
	// Stored after the first page: w0 sorts after the cursor, w9 before.
	_, err = s.AddInboundMessages(ctx(t), []store.InboundMessage{inboundAt("a", "c1", "w0", 50), inboundAt("a", "c1", "w9", 900)})
	must(t, err)
	rest := listAllInbound(t, s, store.InboundFilter{AccountID: "a", From: "c1", Limit: 2, After: next})
	if got := wamids(rest); !slices.Equal(got, []string{"w3", "w2b", "w2a", "w1", "w0"}) {
		t.Fatalf("later pages %v, want [w3 w2b w2a w1 w0]", got)
	}
	all := listAllInbound(t, s, store.InboundFilter{AccountID: "a", Limit: 3})
	if got := wamids(all); !slices.Equal(got, []string{"w9", "w5", "w4", "w3", "w2b", "w2a", "w1", "w0"}) {
		t.Fatalf("every message %v", got)
	}
	if page, next, err := s.ListInbound(ctx(t), store.InboundFilter{AccountID: "a", Limit: 8}); err != nil || len(page) != 8 || next != "" {
		t.Fatalf("a page holding everything: %d, next %q, %v; want 8 and no cursor", len(page), next, err)
	}
	for _, bad := range []string{"x", "12", "12.", "a.dw", "1.!!"} {
		_, _, err := s.ListInbound(ctx(t), store.InboundFilter{AccountID: "a", After: bad})
		wantCode(t, err, wamux.EInvalid)
	}
	_, _, err = s.ListInbound(ctx(t), store.InboundFilter{From: "c1"})
	wantCode(t, err, wamux.EInvalid)
}

// ListInbound keeps to its account and customer.
func testListInboundFilters(t *testing.T, s store.Store) {
	_, err := s.AddInboundMessages(ctx(t), []store.InboundMessage{
		inboundAt("a", "c1", "w1", 100), inboundAt("a", "c2", "w2", 200), inboundAt("b", "c1", "w3", 300),
		{AccountID: "a", WAMID: "w4", Type: "text", SentAt: time.Unix(400, 0)}, // stored without a sender or data
	})
	must(t, err)
	for _, c := range []struct {
		f    store.InboundFilter
		want []string
	}{
		{store.InboundFilter{AccountID: "a", From: "c1"}, []string{"w1"}},
		{store.InboundFilter{AccountID: "a", From: "c2"}, []string{"w2"}},
		{store.InboundFilter{AccountID: "a"}, []string{"w4", "w2", "w1"}},
		{store.InboundFilter{AccountID: "b"}, []string{"w3"}},
		{store.InboundFilter{AccountID: "c"}, nil},
		{store.InboundFilter{AccountID: "a", From: "c3"}, nil},
		{store.InboundFilter{AccountID: "a\x00", From: "c\xff"}, nil},
	} {
		page, next, err := s.ListInbound(ctx(t), c.f)
		must(t, err)
		if got := wamids(page); !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) || next != "" {
			t.Errorf("%+v: %v next %q, want %v", c.f, got, next, c.want)
		}
	}
	page, _, err := s.ListInbound(ctx(t), store.InboundFilter{AccountID: "a"})
	must(t, err)
	if page[0].Data != nil || page[0].From != "" {
		t.Errorf("a message stored without data lists %q from %q", page[0].Data, page[0].From)
	}
}

func testGetInbound(t *testing.T, s store.Store) {
	_, err := s.AddInboundMessages(ctx(t), []store.InboundMessage{inboundAt("a", "c1", "w1", 100)})
	must(t, err)
	m, err := s.GetInbound(ctx(t), "a", "w1")
	must(t, err)
	if m.WAMID != "w1" || m.From != "c1" || string(m.Data) != string(inboundAt("a", "c1", "w1", 100).Data) {
		t.Fatalf("got %+v", m)
	}
	for _, k := range [][2]string{{"b", "w1"}, {"a", "w2"}, {"a", "w1\x00"}, {"a\xff", "w1"}} {
		_, err := s.GetInbound(ctx(t), k[0], k[1])
		wantCode(t, err, wamux.ENotFound)
	}
}

// LastInbound is the newest SentAt of the customer on the account, by
// when it was sent, not stored.
func testLastInbound(t *testing.T, s store.Store) {
	last := func(account, from string) time.Time {
		t.Helper()
		tm, err := s.LastInbound(ctx(t), account, from)
		must(t, err)
		return tm
	}
	if tm := last("a", "c1"); !tm.IsZero() {
		t.Fatalf("last of nothing stored = %v, want zero", tm)
	}
	_, err := s.AddInboundMessages(ctx(t), []store.InboundMessage{
		inboundAt("a", "c1", "w2", 200), inboundAt("a", "c2", "w9", 900), inboundAt("b", "c1", "w8", 800),
	})
	must(t, err)
	_, err = s.AddInboundMessages(ctx(t), []store.InboundMessage{inboundAt("a", "c1", "w1", 100)}) // older, stored later
	must(t, err)
	if tm := last("a", "c1"); !tm.Equal(time.Unix(200, 0)) {
		t.Fatalf("last of a/c1 = %v, want %v", tm, time.Unix(200, 0).UTC())
	}
	wantUTC(t, "LastInbound", last("a", "c1"))
	if tm := last("b", "c1"); !tm.Equal(time.Unix(800, 0)) {
		t.Fatalf("last of b/c1 = %v", tm)
	}
	for _, k := range [][2]string{{"a", "c3"}, {"c", "c1"}, {"a", ""}, {"a", "c\x00"}, {"", "c1"}} {
		if tm := last(k[0], k[1]); !tm.IsZero() {
			t.Errorf("last of %q = %v, want zero", k, tm)
		}
	}
	// Without an account: the customer's owner's.
	must(t, s.SetOwner(ctx(t), "c1", "b", "first"))
	if tm := last("", "c1"); !tm.Equal(time.Unix(800, 0)) {
		t.Fatalf("last of c1 at its owner b = %v", tm)
	}
	must(t, s.SetOwner(ctx(t), "c1", "a", "owner_unavailable"))
	if tm := last("", "c1"); !tm.Equal(time.Unix(200, 0)) {
		t.Fatalf("last of c1 at its owner a = %v", tm)
	}
	must(t, s.SetOwner(ctx(t), "c3", "a", "first"))
	if tm := last("", "c3"); !tm.IsZero() {
		t.Fatalf("last of c3, owned without messages = %v", tm)
	}
}

// PruneInbound deletes the oldest received first, up to its limit, and
// keeps the events already written.
func testPruneInbound(t *testing.T, s store.Store) {
	var ms []store.InboundMessage
	for i := range 5 {
		ms = append(ms, inboundAt("a", "c1", fmt.Sprintf("w%d", i), int64(100*(i+1))))
	}
	_, err := s.AddInboundMessages(ctx(t), ms)
	must(t, err)
	allEvents(t, s, 5)
	cut := time.Unix(350, 0) // received at 101, 201, 301 are older
	n, err := s.PruneInbound(ctx(t), cut, 2)
	must(t, err)
	if n != 2 {
		t.Fatalf("pruned %d, want 2 (the limit)", n)
	}
	left := listAllInbound(t, s, store.InboundFilter{AccountID: "a", Limit: 10})
	if got := wamids(left); !slices.Equal(got, []string{"w4", "w3", "w2"}) {
		t.Fatalf("after one batch %v, want the two oldest gone", got)
	}
	n, err = s.PruneInbound(ctx(t), cut, 2)
	must(t, err)
	if n != 1 {
		t.Fatalf("second batch pruned %d, want 1", n)
	}
	if n, err = s.PruneInbound(ctx(t), cut, 2); err != nil || n != 0 {
		t.Fatalf("third batch pruned %d, %v; want 0", n, err)
	}
	if got := wamids(listAllInbound(t, s, store.InboundFilter{AccountID: "a", Limit: 10})); !slices.Equal(got, []string{"w4", "w3"}) {
		t.Fatalf("left %v", got)
	}
	if evs := allEvents(t, s, 5); len(evs) != 5 {
		t.Fatalf("%d events after pruning inbound messages, want 5", len(evs))
	}
	// A pruned message stored again is new: it has a second event.
	if n, err := s.AddInboundMessages(ctx(t), ms[:1]); err != nil || n != 1 {
		t.Fatalf("storing a pruned message again added %d, %v", n, err)
	}
}
