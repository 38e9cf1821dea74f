package receiptlog

import (
	"errors"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/wamux/wamux"
)

// awkward holds strings the hand-written JSON encoder must escape.
var awkward = []string{"", `"quoted"`, `back\slash`, "tab\tnew\nline\r", "\x00\x01\x1f", "ünïcödé ✓ 𝄞", "</script>&"}

func testReceipt(i int) wamux.Receipt {
	s := awkward[i%len(awkward)]
	return wamux.Receipt{MessageID: "wamid." + s, AccountID: "acc" + s, Type: wamux.ReceiptDelivered,
		EventTime: time.UnixMilli(1_700_000_000_000 + int64(i)).UTC(), CallbackData: s, Recipient: "15550001",
		ErrorCode: 131000 + i, ErrorTitle: s, Source: "webhook", ReceivedAt: time.UnixMilli(1_700_000_001_000).UTC()}
}

func TestEncodeDecode(t *testing.T) {
	var rs []wamux.Receipt
	for i := range 2 * len(awkward) {
		rs = append(rs, testReceipt(i))
	}
	got, err := Decode(Encode(rs, 0))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rs) {
		t.Fatalf("decoded %d receipts, want %d", len(got), len(rs))
	}
	for i := range rs {
		if got[i] != rs[i] {
			t.Errorf("receipt %d: got %+v, want %+v", i, got[i], rs[i])
		}
	}
	// A receipt without ReceivedAt is stamped with the append time.
	got, err = Decode(Encode([]wamux.Receipt{{MessageID: "m", AccountID: "a", Type: wamux.ReceiptSent}}, 42))
	if err != nil || !got[0].ReceivedAt.Equal(time.UnixMilli(42)) {
		t.Fatalf("received_at = %v (%v), want the append time", got[0].ReceivedAt, err)
	}
	for _, bad := range []string{`{}`, `[[1,2]]`, `[["m","a","t","not a number","","",0,"","",0]]`, `[`} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("decoded %s", bad)
		}
	}
}

// FuzzEncode: whatever strings a receipt carries, the entry decodes to
// them (invalid UTF-8 as U+FFFD, as encoding/json would store it).
func FuzzEncode(f *testing.F) {
	for _, s := range awkward {
		f.Add(s, s, int64(1), 7)
	}
	f.Add("\xff\xfe", "a\u2028b", int64(-5), -1)
	f.Fuzz(func(t *testing.T, a, b string, event int64, code int) {
		r := wamux.Receipt{MessageID: a, AccountID: b, Type: wamux.ReceiptType(a + b), EventTime: time.UnixMilli(event).UTC(),
			CallbackData: b, ErrorCode: code, ErrorTitle: a, Source: b, ReceivedAt: time.UnixMilli(9).UTC()}
		got, err := Decode(Encode([]wamux.Receipt{r, r}, 0))
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		want := r
		want.MessageID, want.AccountID = validUTF8(a), validUTF8(b)
		want.Type = wamux.ReceiptType(validUTF8(a + b))
		want.CallbackData, want.ErrorTitle, want.Source = validUTF8(b), validUTF8(a), validUTF8(b)
		if event == 0 {
			want.EventTime = time.Time{}
		}
		if len(got) != 2 || got[0] != want || got[1] != want {
			t.Fatalf("got %+v, want twice %+v", got, want)
		}
	})
}

// validUTF8 replaces each invalid byte with U+FFFD, as encoding/json does.
func validUTF8(s string) string {
	out := make([]rune, 0, len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		out = append(out, r)
		i += size
	}
	return string(out)
}

func TestIDs(t *testing.T) {
	for _, c := range []struct {
		entry int64
		i     int
	}{{1, 0}, {1, MaxEntry - 1}, {1 << 40, 5}} {
		if e, i := Split(ID(c.entry, c.i)); e != c.entry || i != c.i {
			t.Errorf("Split(ID(%d, %d)) = %d, %d", c.entry, c.i, e, i)
		}
	}
	if ID(1, MaxEntry-1) >= ID(2, 0) {
		t.Error("ids of a later entry do not sort after the earlier entry's")
	}
	rs := make([]wamux.Receipt, 2*MaxEntry+1)
	if cs := Chunks(rs); len(cs) != 3 || len(cs[0]) != MaxEntry || len(cs[2]) != 1 {
		t.Errorf("chunks of %d: %d", len(rs), len(cs))
	}
}

// TestAcks: marks count once, complete an entry exactly when its last
// receipt is marked, ask the store about unknown entries, and a failed
// delete is handed out again.
func TestAcks(t *testing.T) {
	a := NewAcks()
	a.Register(1, 3)
	noStore := func(int64) (int, bool, error) {
		t.Fatal("asked the store about a registered entry")
		return 0, false, nil
	}
	marked, done, err := a.Mark([]int64{ID(1, 0), ID(1, 0), ID(1, 7)}, noStore)
	if err != nil || marked != 1 || len(done) != 0 {
		t.Fatalf("first mark: %d %v %v, want 1 and nothing done", marked, done, err)
	}
	if !a.Acked(ID(1, 0)) || a.Acked(ID(1, 1)) {
		t.Fatal("Acked disagrees with the marks")
	}
	marked, done, _ = a.Mark([]int64{ID(1, 1), ID(1, 2)}, noStore)
	if marked != 2 || len(done) != 1 || done[0] != 1 {
		t.Fatalf("second mark: %d %v, want 2 and entry 1 done", marked, done)
	}
	a.Deleted(done, errors.New("disk full"))
	// Unknown entry: sized by the store; missing entries count nothing.
	sizes := map[int64]int{2: 1}
	marked, done, _ = a.Mark([]int64{ID(2, 0), ID(3, 0)}, func(e int64) (int, bool, error) {
		n, ok := sizes[e]
		return n, ok, nil
	})
	if marked != 1 || len(done) != 2 {
		t.Fatalf("mark after a failed delete: %d %v, want 1 and entries 2 and 1 (again)", marked, done)
	}
	a.Deleted(done, nil)
	if a.Acked(ID(1, 0)) {
		t.Fatal("a deleted entry is still tracked")
	}
	// A failed append forgets its registration unless marks were made.
	a.Register(4, 2)
	a.Register(5, 2)
	a.Mark([]int64{ID(5, 0)}, noStore)
	a.Forget([]int64{4, 5})
	if !a.Acked(ID(5, 0)) {
		t.Fatal("Forget dropped an entry with marks")
	}
	// A lookup that fails marks nothing, not even the known entry's
	// receipt before it: the caller will acknowledge all of them again.
	if n, _, err := a.Mark([]int64{ID(5, 1), ID(4, 0)}, func(int64) (int, bool, error) { return 0, false, errors.New("down") }); err == nil || n != 0 {
		t.Fatalf("mark with a failing lookup = %d, %v; want 0 and the error (a forgotten entry is looked up again)", n, err)
	}
	if a.Acked(ID(5, 1)) {
		t.Fatal("a mark made before the failing lookup stayed")
	}
}
