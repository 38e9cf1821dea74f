package netguard

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParseNetworks parses a comma-separated list of CIDR prefixes, the form of
// WAMUX_EVENT_ALLOW_NETWORKS. Spaces around entries and empty entries are
// ignored; a bare IP address stands for its /32 or /128; an empty list yields
// nil. IPv4-mapped IPv6 prefixes become their IPv4 form, since addresses are
// unmapped before they are matched.
func ParseNetworks(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		p, err := parseNetwork(entry)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func parseNetwork(entry string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.Contains(entry, "/") {
		var err error
		if p, err = netip.ParsePrefix(entry); err != nil {
			return netip.Prefix{}, fmt.Errorf("netguard: network %q is not a CIDR prefix such as 10.0.0.0/8 or fd00::/8", entry)
		}
	} else {
		a, err := netip.ParseAddr(entry)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("netguard: network %q is neither a CIDR prefix nor an IP address", entry)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}
