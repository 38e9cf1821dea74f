package postgres

import (
	"strconv"
	"testing"

	"github.com/wamux/wamux"
)

// FuzzParseCursor: a client's after= of GET /v1/events is either refused
// as invalid or read as a (txid, id) the store could have handed out (an
// id that is not negative), whose cursor reads back the same; "" is the
// start of the feed.
func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "0:0", "812:1", "18446744073709551615:9223372036854775807", "18446744073709551616:1",
		"-1:1", "+1:+1", "1:", ":1", "1:2:3", "1", " 1:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		txid, id, err := parseCursor(s)
		if err != nil {
			if wamux.ErrorCode(err) != wamux.EInvalid || txid != 0 || id != 0 {
				t.Fatalf("%q: (%d, %d), %v; want an invalid-input error", s, txid, id, err)
			}
			return
		}
		if s == "" {
			if txid != 0 || id != 0 {
				t.Fatalf("the empty cursor read as (%d, %d)", txid, id)
			}
			return
		}
		if id < 0 {
			t.Fatalf("%q read as id %d", s, id)
		}
		c := strconv.FormatUint(txid, 10) + ":" + strconv.FormatInt(id, 10)
		if x, i, err := parseCursor(c); err != nil || x != txid || i != id {
			t.Fatalf("%q → (%d, %d) → %q → (%d, %d), %v", s, txid, id, c, x, i, err)
		}
	})
}
