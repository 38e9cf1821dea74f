package receipts

import (
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func rcpt(typ wamux.ReceiptType, eventSec int, code int) wamux.Receipt {
	return wamux.Receipt{
		MessageID: "wamid.1",
		AccountID: "acc",
		Type:      typ,
		EventTime: t0.Add(time.Duration(eventSec) * time.Second),
		ErrorCode: code,
	}
}

func state(typ wamux.ReceiptType, eventSec int, code int, updated time.Time) *store.MessageState {
	return &store.MessageState{
		StateKey:  store.StateKey{AccountID: "acc", MessageID: "wamid.1"},
		Type:      typ,
		EventTime: t0.Add(time.Duration(eventSec) * time.Second),
		ErrorCode: code,
		UpdatedAt: updated,
	}
}

func TestMergeCases(t *testing.T) {
	const window = 5 * time.Minute
	tests := []struct {
		name     string
		cur      *store.MessageState
		r        wamux.Receipt
		now      time.Time
		want     Decision
		wantType wamux.ReceiptType
	}{
		{"first receipt applies", nil, rcpt(wamux.ReceiptSent, 1, 0), t0, Apply, wamux.ReceiptSent},
		{"failed after delivered is ignored", state(wamux.ReceiptDelivered, 10, 0, t0), rcpt(wamux.ReceiptFailed, 20, 131026), t0, Ignore, wamux.ReceiptDelivered},
		{"delivered after failed wins though earlier", state(wamux.ReceiptFailed, 20, 131026, t0), rcpt(wamux.ReceiptDelivered, 10, 0), t0.Add(time.Minute), Apply, wamux.ReceiptDelivered},
		{"read after failed wins", state(wamux.ReceiptFailed, 20, 131026, t0), rcpt(wamux.ReceiptRead, 30, 0), t0, Apply, wamux.ReceiptRead},
		{"failed is final against a later sent", state(wamux.ReceiptFailed, 10, 131026, t0), rcpt(wamux.ReceiptSent, 20, 0), t0, Ignore, wamux.ReceiptFailed},
		{"failed beats an earlier sent", state(wamux.ReceiptSent, 10, 0, t0), rcpt(wamux.ReceiptFailed, 20, 131026), t0, Apply, wamux.ReceiptFailed},
		{"delivered after read (read came first) is ignored", state(wamux.ReceiptRead, 20, 0, t0), rcpt(wamux.ReceiptDelivered, 10, 0), t0, Ignore, wamux.ReceiptRead},
		{"read after delivered applies", state(wamux.ReceiptDelivered, 10, 0, t0), rcpt(wamux.ReceiptRead, 20, 0), t0, Apply, wamux.ReceiptRead},
		{"equal duplicate is ignored", state(wamux.ReceiptDelivered, 10, 0, t0), rcpt(wamux.ReceiptDelivered, 10, 0), t0, Ignore, wamux.ReceiptDelivered},
		{"equal strength, later event wins", state(wamux.ReceiptSent, 10, 0, t0), rcpt(wamux.ReceiptSent, 11, 0), t0, Apply, wamux.ReceiptSent},
		{"equal strength, earlier event ignored", state(wamux.ReceiptSent, 10, 0, t0), rcpt(wamux.ReceiptSent, 9, 0), t0, Ignore, wamux.ReceiptSent},
		{"tie broken by larger error code", state(wamux.ReceiptFailed, 10, 131026, t0), rcpt(wamux.ReceiptFailed, 10, 131047), t0, Apply, wamux.ReceiptFailed},
		{"tie with smaller error code ignored", state(wamux.ReceiptFailed, 10, 131047, t0), rcpt(wamux.ReceiptFailed, 10, 131026), t0, Ignore, wamux.ReceiptFailed},
		{"unknown type ignored on empty state", nil, rcpt("bogus", 10, 0), t0, Ignore, ""},
		{"unknown type ignored", state(wamux.ReceiptSent, 10, 0, t0), rcpt("bogus", 20, 0), t0, Ignore, wamux.ReceiptSent},
		{"late: out of order after the window", state(wamux.ReceiptFailed, 20, 131026, t0), rcpt(wamux.ReceiptDelivered, 10, 0), t0.Add(window + time.Nanosecond), Late, wamux.ReceiptFailed},
		{"not late at exactly the window", state(wamux.ReceiptFailed, 20, 131026, t0), rcpt(wamux.ReceiptDelivered, 10, 0), t0.Add(window), Apply, wamux.ReceiptDelivered},
		{"in order after the window applies", state(wamux.ReceiptSent, 10, 0, t0), rcpt(wamux.ReceiptDelivered, 20, 0), t0.Add(time.Hour), Apply, wamux.ReceiptDelivered},
		{"weaker after the window is ignored, not late", state(wamux.ReceiptRead, 20, 0, t0), rcpt(wamux.ReceiptDelivered, 10, 0), t0.Add(time.Hour), Ignore, wamux.ReceiptRead},
		{"same event time after the window applies", state(wamux.ReceiptSent, 10, 0, t0), rcpt(wamux.ReceiptFailed, 10, 1), t0.Add(time.Hour), Apply, wamux.ReceiptFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before store.MessageState
			if tt.cur != nil {
				before = *tt.cur
			}
			next, d := Merge(tt.cur, tt.r, tt.now, window)
			if d != tt.want {
				t.Fatalf("decision = %v, want %v", d, tt.want)
			}
			if next.Type != tt.wantType {
				t.Fatalf("next type = %q, want %q", next.Type, tt.wantType)
			}
			if tt.cur != nil && *tt.cur != before {
				t.Fatalf("Merge modified cur: %+v, was %+v", *tt.cur, before)
			}
			switch d {
			case Apply:
				want := store.MessageState{
					StateKey:  store.StateKey{AccountID: tt.r.AccountID, MessageID: tt.r.MessageID},
					Type:      tt.r.Type,
					EventTime: tt.r.EventTime,
					ErrorCode: tt.r.ErrorCode,
					UpdatedAt: tt.now,
				}
				if next != want {
					t.Fatalf("next = %+v, want %+v", next, want)
				}
			default:
				if next != before {
					t.Fatalf("%v changed the state: %+v, was %+v", d, next, before)
				}
			}
		})
	}
}

func TestMergePanicsOnOtherMessage(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Merge of another message's receipt did not panic")
		}
	}()
	r := rcpt(wamux.ReceiptRead, 1, 0)
	r.MessageID = "wamid.2"
	Merge(state(wamux.ReceiptSent, 0, 0, t0), r, t0, time.Minute)
}

func TestDecisionString(t *testing.T) {
	for d, want := range map[Decision]string{Ignore: "ignore", Apply: "apply", Late: "late", Decision(9): "Decision(9)"} {
		if got := d.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(d), got, want)
		}
	}
}
