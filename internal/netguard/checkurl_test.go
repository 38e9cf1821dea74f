package netguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/wamux/wamux"
)

// fakeDNS answers lookups from a table that a test may change between calls.
type fakeDNS struct {
	mu    sync.Mutex
	hosts map[string][]string
	asked []string
}

func newFakeDNS(hosts map[string][]string) *fakeDNS { return &fakeDNS{hosts: hosts} }

func (d *fakeDNS) set(host string, addrs ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hosts[host] = addrs
}

func (d *fakeDNS) lookups() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.asked...)
}

func (d *fakeDNS) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = append(d.asked, host)
	addrs, ok := d.hosts[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, Server: "10.9.9.9:53", IsNotFound: true}
	}
	var out []net.IPAddr
	for _, a := range addrs {
		ip, zone, _ := strings.Cut(a, "%")
		out = append(out, net.IPAddr{IP: net.ParseIP(ip), Zone: zone})
	}
	return out, nil
}

func TestCheckURL(t *testing.T) {
	dns := newFakeDNS(map[string][]string{
		"hooks.example.com":    {"93.184.216.34", "2606:2800:220:1::1"},
		"internal.example":     {"10.0.0.5"},
		"mixed.example":        {"93.184.216.34", "127.0.0.1"},
		"mapped.example":       {"::ffff:127.0.0.1"},
		"metadata.example":     {"169.254.169.254"},
		"empty.example":        {},
		"linklocal6.example":   {"fe80::1%eth0"},
		"localhost.example":    {"127.0.0.1", "::1"},
		"cgnat.example":        {"100.64.1.1"},
		"nat64.example":        {"64:ff9b::a00:5"},
		"public-nat64.example": {"64:ff9b::808:808"},
	})
	loopback, err := ParseNetworks("127.0.0.0/8,::1/128")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		allow   []netip.Prefix
		url     string
		wantErr string // "" when accepted
	}{
		{"https public name", nil, "https://hooks.example.com/events?x=1", ""},
		{"https public name with port", nil, "https://hooks.example.com:8443/events", ""},
		{"upper-case scheme", nil, "HTTPS://hooks.example.com/", ""},
		{"https public literal", nil, "https://93.184.216.34/", ""},
		{"https public v6 literal", nil, "https://[2606:2800:220:1::1]:443/", ""},
		{"https public through NAT64", nil, "https://public-nat64.example/", ""},
		{"http public name", nil, "http://hooks.example.com/", "outside WAMUX_EVENT_ALLOW_NETWORKS, where plain http is refused"},
		{"http public literal", nil, "http://93.184.216.34/", "plain http is refused"},
		{"loopback literal", nil, "https://127.0.0.1/", `url host "127.0.0.1" resolves to 127.0.0.1, a loopback address; allow it with WAMUX_EVENT_ALLOW_NETWORKS`},
		{"loopback v6 literal", nil, "https://[::1]/", "loopback"},
		{"mapped loopback literal", nil, "https://[::ffff:127.0.0.1]/", "resolves to 127.0.0.1, a loopback"},
		{"private name", nil, "https://internal.example/", `url host "internal.example" resolves to 10.0.0.5, a private address`},
		{"one bad address among good ones", nil, "https://mixed.example/", "loopback"},
		{"mapped loopback name", nil, "https://mapped.example/", "loopback"},
		{"cloud metadata", nil, "https://metadata.example/latest", "link-local"},
		{"link-local v6 with zone", nil, "https://linklocal6.example/", "link-local"},
		{"link-local v6 literal with zone", nil, "https://[fe80::1%25eth0]/", "link-local"},
		{"cgnat", nil, "https://cgnat.example/", "shared (CGNAT)"},
		{"private through NAT64", nil, "https://nat64.example/", "NAT64 private"},
		{"unspecified", nil, "https://0.0.0.0/", "unspecified"},
		{"this network", nil, "https://0.0.0.1/", "this-network"},
		{"broadcast", nil, "https://255.255.255.255/", "broadcast"},
		{"loopback allowed", loopback, "https://localhost.example/", ""},
		{"http loopback allowed", loopback, "http://127.0.0.1:8080/hook", ""},
		{"http v6 loopback allowed", loopback, "http://[::1]:8080/hook", ""},
		{"http partly outside allow", loopback, "http://mixed.example/", "plain http is refused"},
		{"private outside allow", loopback, "https://internal.example/", "private"},
		{"unknown host", nil, "https://nowhere.example/", `url host "nowhere.example" does not resolve: no such host`},
		{"no addresses", nil, "https://empty.example/", "does not resolve: no addresses"},
		{"ftp", nil, "ftp://hooks.example.com/", "scheme must be https"},
		{"no scheme", nil, "hooks.example.com/events", "scheme must be https"},
		{"javascript", nil, "javascript:alert(1)", "scheme must be https"},
		{"credentials", nil, "https://user:pw@hooks.example.com/", "must not contain credentials"},
		{"user only", nil, "https://user@hooks.example.com/", "must not contain credentials"},
		{"empty userinfo", nil, "https://@hooks.example.com/", "must not contain credentials"},
		{"no host", nil, "https:///events", "needs a host"},
		{"opaque", nil, "https:hooks.example.com", "needs a host"},
		{"port only", nil, "https://:443/", "needs a host"},
		{"port zero", nil, "https://hooks.example.com:0/", "port must be 1 to 65535"},
		{"port too big", nil, "https://hooks.example.com:65536/", "port must be 1 to 65535"},
		{"bad escape", nil, "https://hooks.example.com/%zz", "does not parse"},
		{"control character", nil, "https://hooks.example.com/\x7f", "does not parse"},
		{"too long", nil, "https://hooks.example.com/" + strings.Repeat("a", MaxURLLength), "longer than 2048 bytes"},
		{"longest accepted", nil, "https://hooks.example.com/" + strings.Repeat("a", MaxURLLength-len("https://hooks.example.com/")), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &Guard{Allow: tt.allow, LookupIPAddr: dns.LookupIPAddr}
			err := g.CheckURL(context.Background(), tt.url)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckURL(%q) = %v, want nil", tt.url, err)
				}
				return
			}
			var we *wamux.Error
			if !errors.As(err, &we) || we.Code != wamux.EInvalid {
				t.Fatalf("CheckURL(%q) = %v, want a *wamux.Error with code %q", tt.url, err, wamux.EInvalid)
			}
			if !strings.Contains(we.Message, tt.wantErr) {
				t.Fatalf("CheckURL(%q) message %q, want it to contain %q", tt.url, we.Message, tt.wantErr)
			}
		})
	}
}

func TestCheckURLDoesNotResolveLiterals(t *testing.T) {
	dns := newFakeDNS(map[string][]string{})
	g := &Guard{LookupIPAddr: dns.LookupIPAddr}
	for _, u := range []string{"https://93.184.216.34/", "https://[2606:2800:220:1::1]/", "https://127.0.0.1/"} {
		_ = g.CheckURL(context.Background(), u)
	}
	if got := dns.lookups(); len(got) != 0 {
		t.Fatalf("literal addresses were looked up: %v", got)
	}
}

func TestCheckURLErrorsDoNotLeakTheDNSServer(t *testing.T) {
	g := &Guard{LookupIPAddr: newFakeDNS(map[string][]string{}).LookupIPAddr}
	err := g.CheckURL(context.Background(), "https://nowhere.example/")
	if err == nil || strings.Contains(err.Error(), "10.9.9.9") {
		t.Fatalf("CheckURL = %v, want an error without the resolver's address", err)
	}
}

func TestCheckURLCancelledIsNotInvalid(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g := &Guard{LookupIPAddr: func(ctx context.Context, _ string) ([]net.IPAddr, error) { return nil, ctx.Err() }}
	err := g.CheckURL(ctx, "https://hooks.example.com/")
	if !errors.Is(err, context.Canceled) || wamux.ErrorCode(err) == wamux.EInvalid {
		t.Fatalf("CheckURL with a cancelled context = %v, want context.Canceled, not EInvalid", err)
	}
}

func TestCheckURLUsesTheDefaultResolver(t *testing.T) {
	g := &Guard{}
	err := g.CheckURL(context.Background(), "https://localhost/")
	if wamux.ErrorCode(err) != wamux.EInvalid || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("CheckURL(https://localhost/) = %v, want a loopback refusal", err)
	}
}
