package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// testPipeline covers the PipelineStore methods the receipt pipeline relies
// on: the durable log (append, read in id order, ack), batch message lookup
// and the inbound record.
func testPipeline(t *testing.T, newStore NewStore) {
	t.Run("ReceiptLog", func(t *testing.T) {
		s := newStore(t)
		a := testReceipt("w1", "acc1", wamux.ReceiptSent)
		b := testReceipt("w1", "acc1", wamux.ReceiptRead)
		// The log keeps repeats: it is a stream, dedup comes later.
		ids, err := s.AppendReceiptLog(ctx(t), []wamux.Receipt{a, b, a})
		must(t, err)
		if len(ids) != 3 || !(ids[0] < ids[1] && ids[1] < ids[2]) {
			t.Fatalf("ids = %v, want 3 increasing", ids)
		}
		big := make([]wamux.Receipt, 1500) // crosses a chunk boundary
		for i := range big {
			big[i] = testReceipt("m"+time.Duration(i).String(), "acc2", wamux.ReceiptDelivered)
		}
		more, err := s.AppendReceiptLog(ctx(t), big)
		must(t, err)
		if len(more) != len(big) || more[0] <= ids[2] {
			t.Fatalf("second append ids start at %d after %d", more[0], ids[2])
		}

		got, err := s.ListReceiptLog(ctx(t), 0, 10_000)
		must(t, err)
		if len(got) != 3+len(big) {
			t.Fatalf("log holds %d, want %d", len(got), 3+len(big))
		}
		for i, l := range got[:3] {
			if l.ID != ids[i] || !sameReceipt(l.Receipt, []wamux.Receipt{a, b, a}[i]) {
				t.Fatalf("log[%d] = %+v, want id %d %+v", i, l, ids[i], []wamux.Receipt{a, b, a}[i])
			}
		}
		for i, l := range got[3:] {
			if l.ID != more[i] || l.MessageID != big[i].MessageID {
				t.Fatalf("log[%d] = id %d %s, want id %d %s", 3+i, l.ID, l.MessageID, more[i], big[i].MessageID)
			}
		}
		page, err := s.ListReceiptLog(ctx(t), ids[0], 2)
		must(t, err)
		if len(page) != 2 || page[0].ID != ids[1] || page[1].ID != ids[2] {
			t.Fatalf("page after %d = %+v, want ids %d, %d", ids[0], page, ids[1], ids[2])
		}

		n, err := s.AckReceiptLog(ctx(t), append([]int64{ids[1], ids[1], 1 << 50}, more...))
		must(t, err)
		if n != 1+len(more) {
			t.Fatalf("ack deleted %d, want %d", n, 1+len(more))
		}
		got, err = s.ListReceiptLog(ctx(t), 0, 100)
		must(t, err)
		if len(got) != 2 || got[0].ID != ids[0] || got[1].ID != ids[2] {
			t.Fatalf("log after ack = %+v, want ids %d, %d", got, ids[0], ids[2])
		}
		// Ids are never reused, even once the log is empty.
		_, err = s.AckReceiptLog(ctx(t), []int64{ids[0], ids[2]})
		must(t, err)
		again, err := s.AppendReceiptLog(ctx(t), []wamux.Receipt{a})
		must(t, err)
		if again[0] <= more[len(more)-1] {
			t.Fatalf("id %d reused after the log emptied (last was %d)", again[0], more[len(more)-1])
		}
		if _, err := s.AppendReceiptLog(ctx(t), []wamux.Receipt{{AccountID: "acc1"}}); wamux.ErrorCode(err) != wamux.EInvalid {
			t.Fatalf("append of a receipt without message_id: %v, want invalid", err)
		}
	})

	t.Run("FindMessages", func(t *testing.T) {
		s := newStore(t)
		_, err := s.InsertMessages(ctx(t), []wamux.Message{testMessage("m1", "acc1", 0, "h1"),
			testMessage("m2", "acc1", 0, "h2"), testMessage("m3", "acc1", 0, "h3")})
		must(t, err)
		_, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "m1", Status: wamux.StatusAccepted, WAMID: "wamid.1"})
		must(t, err)
		got, err := s.FindMessages(ctx(t), []string{"wamid.1", "wamid.none"}, []string{"m1", "m3", "nope"})
		must(t, err)
		var ids []string
		for _, m := range got {
			ids = append(ids, m.ID)
			if m.ID == "m1" && (m.WAMID != "wamid.1" || m.Status != wamux.StatusAccepted) {
				t.Fatalf("m1 = %+v, want wamid.1 accepted", m)
			}
		}
		slices.Sort(ids)
		if !slices.Equal(ids, []string{"m1", "m3"}) {
			t.Fatalf("found %v, want [m1 m3] (each once)", ids)
		}
		got, err = s.FindMessages(ctx(t), nil, nil)
		must(t, err)
		if len(got) != 0 {
			t.Fatalf("found %d for no keys", len(got))
		}
		// An id that JSON or SQL would have to escape, at the end of a list
		// longer than one statement's parameters, is still found.
		odd := `wamid."q'\é` + "\t,"
		_, err = s.UpdateMessage(ctx(t), store.MessageUpdate{MsgID: "m2", Status: wamux.StatusAccepted, WAMID: odd})
		must(t, err)
		many := make([]string, 0, 5001)
		for i := range 5000 {
			many = append(many, fmt.Sprintf("wamid.miss.%d", i))
		}
		got, err = s.FindMessages(ctx(t), append(many, odd), []string{`m"2`, "m2 "})
		must(t, err)
		if len(got) != 1 || got[0].ID != "m2" || got[0].WAMID != odd {
			t.Fatalf("found %+v, want m2 with wamid %q alone", got, odd)
		}
	})

	t.Run("FindMessagesByMsgID", func(t *testing.T) {
		// The dispatcher looks a whole submitted batch (up to 1,000 msg_ids,
		// repeats allowed) up by msg_id alone, with no wamids, in one call.
		s := newStore(t)
		stored := []wamux.Message{testMessage("b-0007", "acc1", 0, "h7"), testMessage("b-0700", "acc2", 3, "h700"),
			testMessage("b-1999", "acc1", 0, "h1999")}
		_, err := s.InsertMessages(ctx(t), stored)
		must(t, err)
		ids := make([]string, 0, 2002)
		for i := range 2000 {
			ids = append(ids, fmt.Sprintf("b-%04d", i))
		}
		ids = append(ids, "b-0007", "b-1999")
		got, err := s.FindMessages(ctx(t), nil, ids)
		must(t, err)
		byID := map[string]wamux.Message{}
		for _, m := range got {
			if _, dup := byID[m.ID]; dup {
				t.Fatalf("message %q returned twice", m.ID)
			}
			byID[m.ID] = m
		}
		if len(byID) != len(stored) {
			t.Fatalf("found %d messages, want %d", len(byID), len(stored))
		}
		for _, want := range stored {
			if m, ok := byID[want.ID]; !ok || !sameContent(m, want) {
				t.Fatalf("message %q = %+v (found %v), want %+v", want.ID, m, ok, want)
			}
		}
	})

	t.Run("InboundMessages", func(t *testing.T) {
		s := newStore(t)
		in := []store.InboundMessage{
			{AccountID: "acc1", WAMID: "wamid.in1", Type: "text", SentAt: receiptBase},
			{AccountID: "acc1", WAMID: "wamid.in2", Type: "image", SentAt: receiptBase},
			{AccountID: "acc1", WAMID: "wamid.in1", Type: "text", SentAt: receiptBase},
		}
		n, err := s.AddInboundMessages(ctx(t), in)
		must(t, err)
		if n != 2 {
			t.Fatalf("added %d, want 2 (one repeat in the batch)", n)
		}
		n, err = s.AddInboundMessages(ctx(t), in[:1])
		must(t, err)
		if n != 0 {
			t.Fatalf("repeat added %d, want 0", n)
		}
		if _, err := s.AddInboundMessages(ctx(t), []store.InboundMessage{{AccountID: "acc1"}}); wamux.ErrorCode(err) != wamux.EInvalid {
			t.Fatalf("inbound without wamid: %v, want invalid", err)
		}
	})
}
