package netguard

import (
	"context"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/wamux/wamux"
)

// FuzzCheckURL feeds arbitrary strings to CheckURL with every name resolving
// to one public address. It must never panic, must refuse only with
// EInvalid, and whatever it accepts is an https URL to a host without
// credentials.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"https://hooks.example.com/events",
		"http://hooks.example.com/",
		"https://user:pw@h/",
		"https://[::ffff:127.0.0.1]:443/",
		"https://[fe80::1%25eth0]/",
		"https://127.1/",
		"HTTPS://0x7f.0.0.1/",
		"https://h:99999/",
		"https:opaque",
		"//h/",
		"",
	} {
		f.Add(s)
	}
	g := &Guard{LookupIPAddr: func(context.Context, string) ([]net.IPAddr, error) {
		return []net.IPAddr{{IP: net.ParseIP("93.184.216.34")}}, nil
	}}
	f.Fuzz(func(t *testing.T, raw string) {
		err := g.CheckURL(context.Background(), raw)
		if err != nil {
			if wamux.ErrorCode(err) != wamux.EInvalid {
				t.Fatalf("CheckURL(%q) = %v, want EInvalid", raw, err)
			}
			return
		}
		u, perr := url.Parse(raw)
		if perr != nil || u.Scheme != "https" || u.User != nil || u.Hostname() == "" || len(raw) > MaxURLLength {
			t.Fatalf("CheckURL accepted %q", raw)
		}
		if strings.ContainsAny(u.Hostname(), "/@") {
			t.Fatalf("CheckURL accepted host %q", u.Hostname())
		}
	})
}
