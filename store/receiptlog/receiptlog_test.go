package receiptlog

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

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

// TestEncodeDecode: both formats (the binary one written now, the JSON
// one of earlier versions, still read) give back the receipts as stored.
func TestEncodeDecode(t *testing.T) {
	var rs []wamux.Receipt
	for i := range 2 * len(awkward) {
		rs = append(rs, testReceipt(i))
	}
	for name, encode := range map[string]func([]wamux.Receipt, int64) []byte{"binary": Encode, "json": encodeJSON} {
		got, err := Decode(encode(rs, 0))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != len(rs) {
			t.Fatalf("%s: decoded %d receipts, want %d", name, len(got), len(rs))
		}
		for i := range rs {
			if got[i] != rs[i] {
				t.Errorf("%s: receipt %d: got %+v, want %+v", name, i, got[i], rs[i])
			}
		}
	}
	// A receipt without ReceivedAt is stamped with the append time.
	got, err := Decode(Encode([]wamux.Receipt{{MessageID: "m", AccountID: "a", Type: wamux.ReceiptSent}}, 42))
	if err != nil || !got[0].ReceivedAt.Equal(time.UnixMilli(42)) {
		t.Fatalf("received_at = %v (%v), want the append time", got[0].ReceivedAt, err)
	}
	for _, bad := range []string{`{}`, `[[1,2]]`, `[["m","a","t","not a number","","",0,"","",0]]`, `[`} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("decoded %s", bad)
		}
	}
}

// FuzzEncode: whatever a receipt carries, the entry decodes to it byte
// for byte, invalid UTF-8 included.
func FuzzEncode(f *testing.F) {
	for _, s := range awkward {
		f.Add(s, s, int64(1), 7)
	}
	f.Add("\xff\xfe", "a\u2028b", int64(-5), -1)
	f.Add("wamid.HBgLMTY1MDU1NTEyMzQVAgARGBI5QTNDQTVCM0I0Q0Q1RjMyAA==", "acc", int64(1<<62), 1<<40)
	f.Add("wamid.QR==", "", int64(-1<<63), 0)
	f.Fuzz(func(t *testing.T, a, b string, event int64, code int) {
		r := wamux.Receipt{MessageID: a, AccountID: b, Type: wamux.ReceiptType(a + b), EventTime: time.UnixMilli(event).UTC(),
			CallbackData: b, ErrorCode: code, ErrorTitle: a, Source: b, ReceivedAt: time.UnixMilli(9).UTC()}
		if event == 0 {
			r.EventTime = time.Time{}
		}
		other := r
		other.AccountID, other.EventTime, other.ErrorCode = a, time.UnixMilli(-event/3).UTC(), -code
		if event/3 == 0 {
			other.EventTime = time.Time{}
		}
		got, err := Decode(Encode([]wamux.Receipt{r, other, r}, 0))
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if len(got) != 3 || got[0] != r || got[1] != other || got[2] != r {
			t.Fatalf("got %+v, want %+v, %+v, %+v", got, r, other, r)
		}
	})
}

// FuzzDecode: stored bytes that are not an entry (a torn or corrupted row)
// are an error, never a panic or an absurd allocation; what decodes
// encodes back to an entry that decodes the same.
func FuzzDecode(f *testing.F) {
	var rs []wamux.Receipt
	for i := range 3 {
		rs = append(rs, testReceipt(i))
	}
	f.Add(Encode(rs, 0))
	f.Add(encodeJSON(rs, 0))
	f.Add([]byte{binaryVersion, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{binaryVersion, 1, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Decode(data)
		if err != nil {
			return
		}
		if len(got) > len(data) {
			t.Fatalf("%d receipts out of %d bytes", len(got), len(data))
		}
		again, err := Decode(Encode(got, 0))
		if err != nil {
			t.Fatalf("re-encoded entry: %v", err)
		}
		if len(again) != len(got) {
			t.Fatalf("re-encoded %d receipts, decoded %d", len(got), len(again))
		}
		for i := range got {
			if again[i] != got[i] {
				t.Fatalf("receipt %d: %+v, then %+v", i, got[i], again[i])
			}
		}
	})
}

// TestDecodeMigratedEntries: the JSON entries the stores' migrations
// built from their old per-receipt rows are read.
func TestDecodeMigratedEntries(t *testing.T) {
	migrated := `[["wamid.A","acc1","read",1700000000000,"cb","155",0,"","webhook",1700000000001]]`
	got, err := Decode([]byte(migrated))
	if err != nil || len(got) != 1 || got[0].MessageID != "wamid.A" || got[0].Type != wamux.ReceiptRead ||
		got[0].ReceivedAt != time.UnixMilli(1700000000001).UTC() {
		t.Fatalf("migrated entry: %+v, %v", got, err)
	}
}

// TestBinaryEntries: corrupt entries are refused, and a realistic entry
// (Cloud API message ids, a few accounts) is less than half its JSON.
func TestBinaryEntries(t *testing.T) {
	var rs []wamux.Receipt
	for i := range 100 {
		// The shape of the Cloud API's ids: base64 of the recipient and a
		// hex id in a small binary frame.
		raw := append([]byte{0x1c, 0x18, 11}, "16505551234"...)
		raw = append(append(raw, 0x15, 0x02, 0x00, 0x11, 0x18, 18), fmt.Sprintf("%016X%02X", i*7919, i%256)...)
		rs = append(rs, wamux.Receipt{MessageID: "wamid." + base64.StdEncoding.EncodeToString(append(raw, 0)),
			AccountID: fmt.Sprintf("acc%02d", i%8), Type: wamux.ReceiptDelivered,
			EventTime: time.UnixMilli(1_767_225_600_000 + int64(i)*61_000).UTC(), CallbackData: "msg-" + strconv.Itoa(100_000+i),
			Source: "webhook", ReceivedAt: time.UnixMilli(1_767_225_700_000).UTC()})
	}
	enc, js := Encode(rs, 0), encodeJSON(rs, 0)
	t.Logf("100 receipts: binary %d bytes, JSON %d", len(enc), len(js))
	if 2*len(enc) > len(js) {
		t.Errorf("binary entry %d bytes, JSON %d: want less than half", len(enc), len(js))
	}
	got, err := Decode(enc)
	if err != nil || len(got) != len(rs) || got[99] != rs[99] || got[0] != rs[0] {
		t.Fatalf("round trip: %v", err)
	}
	// Every proper prefix is refused, as is anything after the last receipt.
	for n := 1; n < len(enc); n++ {
		if _, err := Decode(enc[:n]); err == nil {
			t.Fatalf("decoded the first %d of %d bytes", n, len(enc))
		}
	}
	if _, err := Decode(append(slices.Clip(enc), 0)); err == nil {
		t.Error("decoded an entry with a trailing byte")
	}
	// A reference to a string the entry has not spelled out.
	if _, err := Decode([]byte{binaryVersion, 1, 0, 3}); err == nil {
		t.Error("decoded a dangling string reference")
	}
	// A non-canonical base64 id is kept as written.
	odd := wamux.Receipt{MessageID: "wamid.QR==", AccountID: "a", Type: wamux.ReceiptSent}
	if got, err := Decode(Encode([]wamux.Receipt{odd}, 5)); err != nil || got[0].MessageID != odd.MessageID {
		t.Fatalf("non-canonical id: %+v, %v", got, err)
	}
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
