package sqlite

import (
	"strconv"
	"testing"

	"github.com/wamux/wamux"
)

// FuzzParseCursor: a client's after= of GET /v1/events is either refused
// as invalid or read as an event id the store could have handed out (one
// that is not negative), whose cursor reads back the same; "" is the
// start of the feed.
func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "0", "1", "42", "9223372036854775807", "9223372036854775808", "-1", "+7", "007", " 1", "1:2", "0x10", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := parseCursor(s)
		if err != nil {
			if wamux.ErrorCode(err) != wamux.EInvalid || id != 0 {
				t.Fatalf("%q: %d, %v; want an invalid-input error", s, id, err)
			}
			return
		}
		if s == "" {
			if id != 0 {
				t.Fatalf("the empty cursor read as %d", id)
			}
			return
		}
		if id < 0 {
			t.Fatalf("%q read as id %d", s, id)
		}
		if again, err := parseCursor(strconv.FormatInt(id, 10)); err != nil || again != id {
			t.Fatalf("%q → %d → %d, %v", s, id, again, err)
		}
	})
}
