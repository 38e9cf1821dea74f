package netguard

import (
	"net/netip"
	"strings"

	"github.com/wamux/wamux"
)

// AllowEnv names the setting that lists the networks where destinations may
// point although their addresses are restricted or the scheme is plain http.
const AllowEnv = "WAMUX_EVENT_ALLOW_NETWORKS"

// special lists the address blocks that are not public besides those the
// netip predicates recognize, with the word an error uses for each.
var special = []struct {
	prefix netip.Prefix
	class  string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
}

// nat64 is the well-known NAT64 prefix; its addresses reach the IPv4 address
// in their last 32 bits, so they are judged as that address.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// restrictedClass names the kind of non-public address a is, or returns ""
// for a public address. a must be unmapped and without zone.
func restrictedClass(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "invalid"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast(), a.IsMulticast():
		return "multicast"
	}
	for _, s := range special {
		if s.prefix.Contains(a) {
			return s.class
		}
	}
	if nat64.Contains(a) {
		b := a.As16()
		if class := restrictedClass(netip.AddrFrom4([4]byte(b[12:]))); class != "" {
			return "NAT64 " + class
		}
	}
	return ""
}

// allowed reports whether a lies inside one of the allowed networks.
func (g *Guard) allowed(a netip.Addr) bool {
	for _, p := range g.Allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// checkAddr applies the destination rule to one address host resolves to:
// an address inside Allow is always fine; outside it, a restricted address is
// refused, and so is any address when plainHTTP.
func (g *Guard) checkAddr(host string, a netip.Addr, plainHTTP bool) error {
	a = a.Unmap().WithZone("")
	if g.allowed(a) {
		return nil
	}
	if class := restrictedClass(a); class != "" {
		return wamux.Errorf(wamux.EInvalid, "url host %q resolves to %s, %s %s address; allow it with %s", host, a, article(class), class, AllowEnv)
	}
	if plainHTTP {
		return wamux.Errorf(wamux.EInvalid, "url host %q resolves to %s, outside %s, where plain http is refused; use https", host, a, AllowEnv)
	}
	return nil
}

// article is the indefinite article before class.
func article(class string) string {
	if strings.ContainsRune("aeiouAEIOU", rune(class[0])) {
		return "an"
	}
	return "a"
}
