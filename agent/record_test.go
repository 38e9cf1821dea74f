package agent

import (
	"errors"
	"testing"

	"pgregory.net/rapid"
)

func genRecord() *rapid.Generator[record] {
	return rapid.Custom(func(t *rapid.T) record {
		return record{
			Seq:       rapid.Uint64Min(1).Draw(t, "seq"),
			MessageID: rapid.StringOfN(rapid.Rune(), 1, 200, MaxMessageIDLen).Draw(t, "id"),
			Type:      rapid.SampledFrom([]string{"sent", "delivered", "read", "failed"}).Draw(t, "type"),
			EventTime: rapid.Int64Min(1).Draw(t, "time"),
			Version:   rapid.IntRange(0, 1<<20).Draw(t, "version"),
		}
	})
}

// Every record decodes to itself, and every strict prefix of it is
// reported as truncated, never as another record.
func TestRecordRoundTrip(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		r := genRecord().Draw(t, "record")
		b, err := appendRecord(nil, r)
		if err != nil {
			t.Skip("record too large") // only for ids of many multi-byte runes
		}
		got, n, err := decodeRecord(b)
		if err != nil || n != len(b) || got != r {
			t.Fatalf("decode = %+v, %d, %v; want %+v, %d", got, n, err, r, len(b))
		}
		cut := rapid.IntRange(0, len(b)-1).Draw(t, "cut")
		if _, _, err := decodeRecord(b[:cut]); !errors.Is(err, errShortRecord) {
			t.Fatalf("prefix of %d/%d bytes: %v, want errShortRecord", cut, len(b), err)
		}
	})
}

// FuzzDecodeRecord feeds the spool decoder arbitrary bytes, as a damaged
// disk would: it must never panic, must claim only bytes it was given, and
// what it accepts must survive a round trip.
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range spoolRecords(3) {
		b, err := appendRecord(nil, r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add(make([]byte, 64))
	f.Add([]byte{0, 0, 0, 2, 0, 0, 0, 0, '{', '}'})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, n, err := decodeRecord(b)
		if err != nil {
			if !errors.Is(err, errShortRecord) && !errors.Is(err, errBadRecord) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if n <= recordHeaderLen || n > len(b) {
			t.Fatalf("decoded %d bytes of %d", n, len(b))
		}
		again, err := appendRecord(nil, r)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", r, err)
		}
		r2, n2, err := decodeRecord(again)
		if err != nil || n2 != len(again) || r2 != r {
			t.Fatalf("round trip: %+v → %+v, %v", r, r2, err)
		}
	})
}
