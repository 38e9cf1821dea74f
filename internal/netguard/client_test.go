package netguard

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wamux/wamux"
)

// countingServer starts a loopback server that counts the requests it serves
// and answers with handler.
func countingServer(t *testing.T, tlsOn bool, handler http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		handler(w, r)
	})
	srv := httptest.NewUnstartedServer(h)
	if tlsOn {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &n
}

func ok(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }

// guardClient returns g's client, trusting srv's certificate for the name
// "example.com" that the test certificate carries, and closes its idle
// connections when the test ends.
func guardClient(t *testing.T, g *Guard, srv *httptest.Server) *http.Client {
	t.Helper()
	c := g.Client(5 * time.Second)
	if srv != nil && srv.TLS != nil {
		tr := c.Transport.(*http.Transport)
		tr.TLSClientConfig = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com"}
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func wantRefused(t *testing.T, err error, reason string) {
	t.Helper()
	var we *wamux.Error
	if !errors.As(err, &we) || we.Code != wamux.EInvalid {
		t.Fatalf("request error = %v, want one wrapping a *wamux.Error with code %q", err, wamux.EInvalid)
	}
	if !strings.Contains(we.Message, reason) {
		t.Fatalf("refusal %q does not say %q", we.Message, reason)
	}
}

func get(c *http.Client, u string) (*http.Response, error) {
	resp, err := c.Get(u)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	return resp, err
}

func TestControlChecksTheConnectedAddress(t *testing.T) {
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	tests := []struct {
		name    string
		allow   []netip.Prefix
		address string
		plain   bool
		ok      bool
	}{
		{"https public", nil, "93.184.216.34:443", false, true},
		{"https public v6", nil, "[2606:2800:220:1::1]:443", false, true},
		{"http public", nil, "93.184.216.34:80", true, false},
		{"https loopback", nil, "127.0.0.1:443", false, false},
		{"https mapped loopback", nil, "[::ffff:127.0.0.1]:443", false, false},
		{"https link-local with zone", nil, "[fe80::1%eth0]:443", false, false},
		{"http loopback allowed", loopback, "127.0.0.1:80", true, true},
		{"http private outside allow", loopback, "10.0.0.1:80", true, false},
		{"unparsable", nil, "example.com:443", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &Guard{Allow: tt.allow}
			err := g.control("h", tt.plain)("tcp", tt.address, nil)
			if tt.ok != (err == nil) {
				t.Fatalf("control(%s, plain=%v) = %v, want ok=%v", tt.address, tt.plain, err, tt.ok)
			}
			if err != nil && wamux.ErrorCode(err) != wamux.EInvalid {
				t.Fatalf("control error %v is not EInvalid", err)
			}
		})
	}
}

func TestClientRefusesLoopbackUnlessAllowed(t *testing.T) {
	srv, served := countingServer(t, false, ok)

	_, err := get(guardClient(t, &Guard{}, srv), srv.URL)
	wantRefused(t, err, "loopback")
	if served.Load() != 0 {
		t.Fatalf("refused request reached the server %d times", served.Load())
	}

	allow, err := ParseNetworks("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := get(guardClient(t, &Guard{Allow: allow}, srv), srv.URL)
	if err != nil {
		t.Fatalf("GET with loopback allowed: %v", err)
	}
	if resp.StatusCode != http.StatusOK || served.Load() != 1 {
		t.Fatalf("status %d, served %d; want 200 and 1", resp.StatusCode, served.Load())
	}
}

func TestClientRefusesARebindingName(t *testing.T) {
	srv, served := countingServer(t, true, ok)
	port := srv.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	dest := (&url.URL{Scheme: "https", Host: "rebind.example:" + itoa(port), Path: "/events"}).String()

	dns := newFakeDNS(map[string][]string{"rebind.example": {"93.184.216.34"}})
	g := &Guard{LookupIPAddr: dns.LookupIPAddr}
	if err := g.CheckURL(context.Background(), dest); err != nil {
		t.Fatalf("CheckURL while the name is public: %v", err)
	}

	dns.set("rebind.example", "127.0.0.1")
	_, err := get(guardClient(t, g, srv), dest)
	wantRefused(t, err, `url host "rebind.example" resolves to 127.0.0.1, a loopback address`)
	if served.Load() != 0 {
		t.Fatalf("rebound request reached the server %d times", served.Load())
	}

	// The same name and server with loopback allowed: the connection is made
	// over TLS to the address the name resolves to at dial time, with HTTP/2.
	allowed := &Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, LookupIPAddr: dns.LookupIPAddr}
	resp, err := get(guardClient(t, allowed, srv), dest)
	if err != nil {
		t.Fatalf("GET with loopback allowed: %v", err)
	}
	if resp.StatusCode != http.StatusOK || resp.Proto != "HTTP/2.0" || served.Load() != 1 {
		t.Fatalf("status %d over %s, served %d; want 200 over HTTP/2.0 and 1", resp.StatusCode, resp.Proto, served.Load())
	}
}

func TestClientRefusesPlainHTTPToAPublicAddress(t *testing.T) {
	srv, served := countingServer(t, false, ok)
	port := srv.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	// The name resolves to a public address and to the server's; plain http
	// needs every address inside Allow, so the dial is refused before any
	// connection is tried.
	dns := newFakeDNS(map[string][]string{"public.example": {"93.184.216.34", "127.0.0.1"}})
	g := &Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, LookupIPAddr: dns.LookupIPAddr}
	_, err := get(guardClient(t, g, srv), "http://public.example:"+itoa(port)+"/")
	wantRefused(t, err, "plain http is refused")
	if served.Load() != 0 {
		t.Fatalf("refused request reached the server %d times", served.Load())
	}
}

func TestClientDoesNotFollowRedirects(t *testing.T) {
	var target atomic.Int64
	srv, _ := countingServer(t, false, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			target.Add(1)
			w.WriteHeader(http.StatusOK)
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	})
	g := &Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	resp, err := get(guardClient(t, g, srv), srv.URL+"/events")
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != "/elsewhere" {
		t.Fatalf("status %d, Location %q; want the 307 itself", resp.StatusCode, resp.Header.Get("Location"))
	}
	if target.Load() != 0 {
		t.Fatal("the redirect was followed")
	}
}

func TestClientSettings(t *testing.T) {
	c := (&Guard{}).Client(7 * time.Second)
	tr, isTransport := c.Transport.(*http.Transport)
	if !isTransport {
		t.Fatalf("transport is %T", c.Transport)
	}
	if c.Timeout != 7*time.Second {
		t.Errorf("Timeout = %v, want 7s", c.Timeout)
	}
	if tr.Proxy != nil {
		t.Error("transport uses a proxy, which would connect in the guard's stead")
	}
	if tr.MaxIdleConnsPerHost != maxIdleConnsPerHost || tr.MaxIdleConnsPerHost < 64 {
		t.Errorf("MaxIdleConnsPerHost = %d, want %d", tr.MaxIdleConnsPerHost, maxIdleConnsPerHost)
	}
	if !tr.ForceAttemptHTTP2 || tr.DialContext == nil || tr.DialTLSContext == nil {
		t.Error("transport must dial both schemes itself and still attempt HTTP/2")
	}
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }
