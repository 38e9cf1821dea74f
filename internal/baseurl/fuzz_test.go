package baseurl_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/wamux/wamux/internal/baseurl"
)

// FuzzAllows: no input panics, and a URL allowed under the default list
// is an https URL whose host is graph.facebook.com, without credentials.
func FuzzAllows(f *testing.F) {
	for _, s := range []string{"https://graph.facebook.com", "https://graph.facebook.com:1/v1", "https://graph.facebook.com@evil",
		"https://evil/graph.facebook.com", "https://graph.facebook.com./x", "https://[::1]:443", "https://GRAPH.FACEBOOK.COM"} {
		f.Add(s, "https://graph.facebook.com")
	}
	f.Fuzz(func(t *testing.T, raw, list string) {
		_, _ = baseurl.Parse(list)
		if !baseurl.MustParse("https://graph.facebook.com").Allows(raw) {
			return
		}
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "https" || u.User != nil || strings.TrimSuffix(strings.ToLower(u.Hostname()), ".") != "graph.facebook.com" {
			t.Fatalf("allowed %q", raw)
		}
	})
}
