package netguard

import (
	"net/netip"
	"testing"

	"github.com/wamux/wamux"
)

func TestRestrictedClass(t *testing.T) {
	tests := []struct {
		addr  string
		class string // "" for public
	}{
		{"8.8.8.8", ""},
		{"93.184.216.34", ""},
		{"2606:4700::1111", ""},
		{"172.15.255.255", ""},
		{"172.32.0.0", ""},
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"198.17.255.255", ""},
		{"198.20.0.0", ""},
		{"192.0.1.0", ""},
		{"223.255.255.255", ""},
		{"64:ff9b::808:808", ""},

		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"::1", "loopback"},
		{"10.0.0.1", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.0.1", "private"},
		{"fc00::1", "private"},
		{"fd12:3456::1", "private"},
		{"169.254.169.254", "link-local"},
		{"fe80::1", "link-local"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"ff01::1", "multicast"},
		{"ff0e::1", "multicast"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"0.1.2.3", "this-network"},
		{"100.64.0.1", "shared (CGNAT)"},
		{"100.127.255.255", "shared (CGNAT)"},
		{"192.0.0.8", "IETF protocol assignment"},
		{"198.18.0.1", "benchmarking"},
		{"198.19.255.255", "benchmarking"},
		{"240.0.0.1", "reserved"},
		{"255.255.255.254", "reserved"},
		{"255.255.255.255", "broadcast"},
		{"fec0::1", "site-local"},
		{"64:ff9b::7f00:1", "NAT64 loopback"},
		{"64:ff9b::a9fe:a9fe", "NAT64 link-local"},
	}
	for _, tt := range tests {
		if got := restrictedClass(netip.MustParseAddr(tt.addr)); got != tt.class {
			t.Errorf("restrictedClass(%s) = %q, want %q", tt.addr, got, tt.class)
		}
	}
	if got := restrictedClass(netip.Addr{}); got == "" {
		t.Error("the zero Addr counts as public")
	}
}

func TestCheckAddr(t *testing.T) {
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	tests := []struct {
		name  string
		allow []netip.Prefix
		addr  string
		plain bool
		ok    bool
	}{
		{"https public", nil, "93.184.216.34", false, true},
		{"https public v6", nil, "2606:4700::1111", false, true},
		{"http public", nil, "93.184.216.34", true, false},
		{"http public inside allow", []netip.Prefix{netip.MustParsePrefix("93.184.216.0/24")}, "93.184.216.34", true, true},
		{"https loopback", nil, "127.0.0.1", false, false},
		{"https loopback allowed", loopback, "127.0.0.1", false, true},
		{"http loopback allowed", loopback, "127.0.0.1", true, true},
		{"http loopback v6 allowed", loopback, "::1", true, true},
		{"mapped loopback", nil, "::ffff:127.0.0.1", false, false},
		{"mapped loopback allowed by v4 prefix", loopback, "::ffff:127.0.0.1", true, true},
		{"mapped private", nil, "::ffff:10.1.2.3", false, false},
		{"mapped metadata", nil, "::ffff:169.254.169.254", false, false},
		{"mapped public", nil, "::ffff:93.184.216.34", false, true},
		{"link-local with zone", nil, "fe80::1%eth0", false, false},
		{"link-local with zone allowed", []netip.Prefix{netip.MustParsePrefix("fe80::/10")}, "fe80::1%eth0", false, true},
		{"private outside a narrower allow", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}, "10.0.1.1", false, false},
		{"private inside allow", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}, "10.0.0.9", false, true},
		{"v6 prefix does not allow v4", []netip.Prefix{netip.MustParsePrefix("::/0")}, "127.0.0.1", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &Guard{Allow: tt.allow}
			err := g.checkAddr("h", netip.MustParseAddr(tt.addr), tt.plain)
			if tt.ok != (err == nil) {
				t.Fatalf("checkAddr(%s, plain=%v) = %v, want ok=%v", tt.addr, tt.plain, err, tt.ok)
			}
			if err != nil && wamux.ErrorCode(err) != wamux.EInvalid {
				t.Fatalf("error %v has code %q, want %q", err, wamux.ErrorCode(err), wamux.EInvalid)
			}
		})
	}
}
