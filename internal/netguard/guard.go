// Package netguard decides where event subscriptions may point and dials
// their destinations under the same rule, so that a business cannot make the
// gateway reach its own private network (server-side request forgery).
//
// The rule: a destination is https, and every address its host resolves to is
// public; a loopback, private, link-local or otherwise special address, and
// any address for plain http, is accepted only inside the allowed networks
// (WAMUX_EVENT_ALLOW_NETWORKS). CheckURL applies it when a subscription is
// stored; the Client applies it again to the address each connection is made
// to, since a name may resolve elsewhere by then (DNS rebinding).
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"

	"github.com/wamux/wamux"
)

// MaxURLLength bounds a destination URL, in bytes.
const MaxURLLength = 2048

// Guard holds the destination rule. The zero value allows only https to
// public addresses, resolved by net.DefaultResolver. It is safe for
// concurrent use when its fields are not changed.
type Guard struct {
	// Allow lists the networks where restricted addresses and plain http
	// are accepted (see ParseNetworks).
	Allow []netip.Prefix
	// LookupIPAddr resolves a host name; nil means
	// net.DefaultResolver.LookupIPAddr.
	LookupIPAddr func(ctx context.Context, host string) ([]net.IPAddr, error)
}

// CheckURL reports whether raw may be the destination of a subscription. It
// requires an absolute http or https URL of at most MaxURLLength bytes with a
// host and without credentials, resolves the host, and applies the rule to
// every address. Refusals are *wamux.Error with code wamux.EInvalid and a
// message naming the reason.
func (g *Guard) CheckURL(ctx context.Context, raw string) error {
	u, err := parseURL(raw)
	if err != nil {
		return err
	}
	_, err = g.resolve(ctx, u.Hostname(), u.Scheme == "http")
	return err
}

// parseURL checks the form of a destination URL.
func parseURL(raw string) (*url.URL, error) {
	if len(raw) > MaxURLLength {
		return nil, wamux.Errorf(wamux.EInvalid, "url is longer than %d bytes", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, wamux.Errorf(wamux.EInvalid, "url does not parse")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, wamux.Errorf(wamux.EInvalid, "url scheme must be https (or http inside %s)", AllowEnv)
	}
	if u.User != nil {
		return nil, wamux.Errorf(wamux.EInvalid, "url must not contain credentials")
	}
	if u.Hostname() == "" {
		return nil, wamux.Errorf(wamux.EInvalid, "url needs a host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, wamux.Errorf(wamux.EInvalid, "url port must be 1 to 65535")
		}
	}
	return u, nil
}

// resolve returns the addresses of host, a name or a literal IP address, and
// refuses them all when any one breaks the rule.
func (g *Guard) resolve(ctx context.Context, host string, plainHTTP bool) ([]netip.Addr, error) {
	addrs, err := g.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if err := g.checkAddr(host, a, plainHTTP); err != nil {
			return nil, err
		}
	}
	return addrs, nil
}

// lookup resolves host; a literal address is its own answer.
func (g *Guard) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	look := g.LookupIPAddr
	if look == nil {
		look = net.DefaultResolver.LookupIPAddr
	}
	ipas, err := look(ctx, host)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("resolve url host: %w", ctx.Err())
		}
		return nil, wamux.Errorf(wamux.EInvalid, "url host %q does not resolve: %s", host, lookupReason(err))
	}
	if len(ipas) == 0 {
		return nil, wamux.Errorf(wamux.EInvalid, "url host %q does not resolve: no addresses", host)
	}
	addrs := make([]netip.Addr, len(ipas))
	for i, ipa := range ipas {
		a, ok := netip.AddrFromSlice(ipa.IP)
		if !ok {
			return nil, wamux.Errorf(wamux.EInvalid, "url host %q resolves to an invalid address", host)
		}
		addrs[i] = a.WithZone(ipa.Zone)
	}
	return addrs, nil
}

// lookupReason is the part of a resolver error that is safe to show: the
// DNS error text without the server it asked.
func lookupReason(err error) string {
	var de *net.DNSError
	if errors.As(err, &de) {
		if de.IsNotFound {
			return "no such host"
		}
		if de.IsTimeout {
			return "lookup timed out"
		}
		return de.Err
	}
	return "lookup failed"
}
