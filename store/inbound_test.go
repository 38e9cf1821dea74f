package store_test

import (
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
)

// FuzzParseInboundCursor: a client's after= parameter is either refused
// as invalid or read as a cursor whose text form reads back the same.
func FuzzParseInboundCursor(f *testing.F) {
	f.Add("")
	f.Add(store.InboundCursor{SentAt: 1750030100000, WAMID: "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUFERjg0NDEzNDdFODU3MUMxMAA="}.String())
	f.Add(store.InboundCursor{SentAt: -5, WAMID: "\x00\xff"}.String())
	f.Add("12.")
	f.Add(".d3")
	f.Add("1.d3.x")
	f.Add("99999999999999999999.d3")
	f.Fuzz(func(t *testing.T, s string) {
		c, ok, err := store.ParseInboundCursor(s)
		switch {
		case err != nil:
			if wamux.ErrorCode(err) != wamux.EInvalid || ok {
				t.Fatalf("%q: %v (ok %v), want invalid", s, err, ok)
			}
		case !ok:
			if s != "" {
				t.Fatalf("%q read as the start", s)
			}
		default:
			if c.WAMID == "" {
				t.Fatalf("%q: a cursor without a wamid", s)
			}
			again, ok, err := store.ParseInboundCursor(c.String())
			if err != nil || !ok || again != c {
				t.Fatalf("%q → %+v → %q → %+v, %v", s, c, c.String(), again, err)
			}
		}
	})
}
