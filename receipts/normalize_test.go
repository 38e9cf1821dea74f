package receipts_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/receipts"
)

// TestNormalizeBoundsEventTimeAhead: an event_time up to MaxEventTimeAhead
// after the receipt was received is taken, a millisecond more is refused
// naming event_time; a receipt without ReceivedAt is not compared.
func TestNormalizeBoundsEventTimeAhead(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := func(event time.Time, received time.Time) *wamux.Receipt {
		return &wamux.Receipt{AccountID: "a", MessageID: "w", Type: wamux.ReceiptSent, EventTime: event, ReceivedAt: received}
	}
	if err := receipts.Normalize(r(at.Add(wamux.MaxEventTimeAhead), at)); err != nil {
		t.Errorf("at the bound: %v", err)
	}
	err := receipts.Normalize(r(at.Add(wamux.MaxEventTimeAhead+time.Millisecond), at))
	if wamux.ErrorCode(err) != wamux.EInvalid || !strings.Contains(wamux.ErrorMessage(err), "event_time") {
		t.Errorf("past the bound: %v, want invalid naming event_time", err)
	}
	if err := receipts.Normalize(r(at.AddDate(70, 0, 0), time.Time{})); err != nil {
		t.Errorf("without ReceivedAt: %v", err)
	}
}

// TestIngestRefusesEventTimeAheadOfItsClock: Ingest compares event_time
// with its own clock (Config.Now) and refuses the whole call, naming the
// receipt, as for any receipt that does not normalize.
func TestIngestRefusesEventTimeAheadOfItsClock(t *testing.T) {
	st := openSQLite(t)
	p := startPipeline(t, receipts.Config{Store: st, Now: func() time.Time { return base }})
	ahead := wamux.Receipt{AccountID: "a", MessageID: "w2", Type: wamux.ReceiptSent, EventTime: base.Add(wamux.MaxEventTimeAhead + time.Second)}
	_, err := p.Ingest(context.Background(), "agent", []wamux.Receipt{rcpt("a", "w1", wamux.ReceiptSent, 1), ahead})
	if wamux.ErrorCode(err) != wamux.EInvalid || !strings.HasPrefix(wamux.ErrorMessage(err), "receipts[1]: event_time") {
		t.Fatalf("err = %v, want invalid naming receipts[1]'s event_time", err)
	}
	if s := p.Stats(); s.Appended != 0 {
		t.Fatalf("stats %+v: the refused call stored receipts", s)
	}
}
