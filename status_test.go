package wamux_test

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/wamux/wamux"
)

// strength is the merge order of receipt types written out by hand, so
// that the expectations below do not lean on ReceiptType.Version.
var strength = map[wamux.ReceiptType]int{
	wamux.ReceiptSent:      0,
	wamux.ReceiptFailed:    1,
	wamux.ReceiptDelivered: 2,
	wamux.ReceiptRead:      3,
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// genRank draws a receipt's rank from small ranges so that ties are common.
func genRank() *rapid.Generator[wamux.ReceiptRank] {
	types := []wamux.ReceiptType{wamux.ReceiptSent, wamux.ReceiptFailed, wamux.ReceiptDelivered, wamux.ReceiptRead}
	return rapid.Custom(func(t *rapid.T) wamux.ReceiptRank {
		return wamux.ReceiptRank{
			Type:      rapid.SampledFrom(types).Draw(t, "type"),
			EventTime: t0.Add(time.Duration(rapid.IntRange(0, 3).Draw(t, "event")) * time.Second),
			ErrorCode: rapid.IntRange(0, 2).Draw(t, "code"),
		}
	})
}

// below is the merge order written out: type strength, then event time,
// then error code.
func below(a, b wamux.ReceiptRank) bool {
	if strength[a.Type] != strength[b.Type] {
		return strength[a.Type] < strength[b.Type]
	}
	if !a.EventTime.Equal(b.EventTime) {
		return a.EventTime.Before(b.EventTime)
	}
	return a.ErrorCode < b.ErrorCode
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// TestReceiptRankIsTheMergeOrder: Compare is the lexicographic order on
// (strength, event time, error code), so a delivered or read outranks a
// failed whatever their event times.
func TestReceiptRankIsTheMergeOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genRank().Draw(t, "a"), genRank().Draw(t, "b")
		want := 0
		switch {
		case below(a, b):
			want = -1
		case below(b, a):
			want = 1
		}
		if got := sign(a.Compare(b)); got != want {
			t.Fatalf("%+v.Compare(%+v) = %d, want sign %d", a, b, a.Compare(b), want)
		}
	})
}

// TestReceiptRankIsATotalOrder: reflexive, antisymmetric and transitive, so
// the greatest of a set of receipts does not depend on the order they are
// compared in, which is what makes the merge converge.
func TestReceiptRankIsATotalOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b, c := genRank().Draw(t, "a"), genRank().Draw(t, "b"), genRank().Draw(t, "c")
		if a.Compare(a) != 0 {
			t.Fatalf("%+v is not equal to itself", a)
		}
		if sign(a.Compare(b)) != -sign(b.Compare(a)) {
			t.Fatalf("Compare is not antisymmetric on %+v, %+v", a, b)
		}
		if a.Compare(b) == 0 && a != b {
			t.Fatalf("distinct ranks %+v and %+v compare equal", a, b)
		}
		if a.Compare(b) <= 0 && b.Compare(c) <= 0 && a.Compare(c) > 0 {
			t.Fatalf("Compare is not transitive on %+v, %+v, %+v", a, b, c)
		}
	})
}

func TestReceiptRank(t *testing.T) {
	r := wamux.Receipt{MessageID: "wamid.1", Type: wamux.ReceiptFailed, EventTime: t0, ErrorCode: 131026}
	want := wamux.ReceiptRank{Type: wamux.ReceiptFailed, EventTime: t0, ErrorCode: 131026}
	if got := r.Rank(); got != want {
		t.Fatalf("Rank() = %+v, want %+v", got, want)
	}
}

func TestMessageStatusFor(t *testing.T) {
	permanent := func(code int) bool { return code == 131049 }
	for _, c := range []struct {
		typ    wamux.ReceiptType
		code   int
		title  string
		want   wamux.Status
		reason string
	}{
		{wamux.ReceiptSent, 0, "", wamux.StatusSent, ""},
		{wamux.ReceiptDelivered, 0, "", wamux.StatusDelivered, ""},
		{wamux.ReceiptRead, 0, "", wamux.StatusRead, ""},
		{wamux.ReceiptFailed, 131049, "", wamux.StatusFailed, "provider reported failure (code 131049)"},
		{wamux.ReceiptFailed, 131049, "Undeliverable", wamux.StatusFailed, "provider reported failure (code 131049): Undeliverable"},
		{wamux.ReceiptFailed, 131000, "", wamux.StatusAccepted, "provider reported failure (code 131000)"},
		{"played", 0, "", "", ""},
	} {
		got, reason := wamux.MessageStatusFor(c.typ, c.code, c.title, permanent)
		if got != c.want || reason != c.reason {
			t.Errorf("MessageStatusFor(%s, %d, %q) = %q, %q; want %q, %q", c.typ, c.code, c.title, got, reason, c.want, c.reason)
		}
	}
}

func TestLastErrorFor(t *testing.T) {
	if got := wamux.LastErrorFor(wamux.StatusFailed, "boom"); got == nil || *got != "boom" {
		t.Errorf("LastErrorFor(failed, boom) = %v, want boom", got)
	}
	for _, s := range []wamux.Status{wamux.StatusDelivered, wamux.StatusRead} {
		if got := wamux.LastErrorFor(s, ""); got == nil || *got != "" {
			t.Errorf("LastErrorFor(%s) = %v, want cleared", s, got)
		}
	}
	if got := wamux.LastErrorFor(wamux.StatusSent, ""); got != nil {
		t.Errorf("LastErrorFor(sent) = %q, want unchanged", *got)
	}
}

// TestForwardFrom: a status resolves a pending send, moves a message only
// forward, and failed never replaces proof of arrival.
func TestForwardFrom(t *testing.T) {
	order := []wamux.Status{wamux.StatusAccepted, wamux.StatusSent, wamux.StatusDelivered, wamux.StatusRead}
	for i, target := range order {
		from := wamux.ForwardFrom(target)
		for _, pending := range []wamux.Status{wamux.StatusSending, wamux.StatusUnknown} {
			if !slices.Contains(from, pending) {
				t.Errorf("%s does not resolve %s", target, pending)
			}
		}
		for j, s := range order {
			if got, want := slices.Contains(from, s), j < i; got != want {
				t.Errorf("%s replaces %s: %v, want %v", target, s, got, want)
			}
		}
	}
	failed := wamux.ForwardFrom(wamux.StatusFailed)
	for _, s := range []wamux.Status{wamux.StatusAccepted, wamux.StatusSent} {
		if !slices.Contains(failed, s) {
			t.Errorf("failed does not replace %s", s)
		}
	}
	for _, s := range []wamux.Status{wamux.StatusDelivered, wamux.StatusRead, wamux.StatusFailed} {
		if slices.Contains(failed, s) {
			t.Errorf("failed replaces %s", s)
		}
	}
	for _, s := range []wamux.Status{wamux.StatusDelivered, wamux.StatusRead} {
		if !slices.Contains(wamux.ForwardFrom(s), wamux.StatusFailed) {
			t.Errorf("%s does not replace failed", s)
		}
	}
	if wamux.ForwardFrom(wamux.StatusQueued) != nil {
		t.Error("a non-provider status replaces something")
	}
}
