package netguard

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"github.com/wamux/wamux"
)

// Connection settings of the Client.
const (
	dialTimeout         = 10 * time.Second
	tlsHandshakeTimeout = 10 * time.Second
	// maxIdleConnsPerHost matches the parallel deliveries one subscription
	// sends to one host.
	maxIdleConnsPerHost = 64
	maxIdleConns        = 1024
	idleConnTimeout     = 90 * time.Second
	maxResponseHeader   = 64 << 10
)

// Client returns an HTTP client for deliveries that applies the rule to every
// connection: plain http is dialed by the transport's DialContext and https by
// its DialTLSContext, and both check each address the host resolves to and,
// in the dialer's Control, the address actually connected to. A refused
// connection fails the request with an error that wraps a *wamux.Error of
// code wamux.EInvalid. Redirects are returned as responses, never followed;
// no proxy is used, since a proxy would connect in the client's stead.
// timeout bounds each request, including reading the body.
//
// TLS settings of the returned transport's TLSClientConfig (roots, for one)
// are honored; the transport's TLSHandshakeTimeout is not.
func (g *Guard) Client(timeout time.Duration) *http.Client {
	tr := &http.Transport{
		Proxy:                  nil,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           maxIdleConns,
		MaxIdleConnsPerHost:    maxIdleConnsPerHost,
		IdleConnTimeout:        idleConnTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: maxResponseHeader,
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return g.dial(ctx, network, addr, true)
	}
	tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := g.dial(ctx, network, addr, false)
		if err != nil {
			return nil, err
		}
		return handshake(ctx, conn, addr, tr.TLSClientConfig)
	}
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// dial resolves the host of addr, refuses when any address breaks the rule,
// and connects to the addresses in turn through a dialer whose Control checks
// the address once more.
func (g *Guard) dial(ctx context.Context, network, addr string, plainHTTP bool) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, wamux.Errorf(wamux.EInvalid, "url port %q is not a port", portStr)
	}
	addrs, err := g.resolve(ctx, host, plainHTTP)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second, Control: g.control(host, plainHTTP)}
	var first error
	for _, a := range addrs {
		conn, err := d.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// control is the dialer's last check: the address a socket is about to
// connect to must pass the rule.
func (g *Guard) control(host string, plainHTTP bool) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return wamux.Errorf(wamux.EInvalid, "url host %q: connection to unparsable address refused", host)
		}
		return g.checkAddr(host, ap.Addr(), plainHTTP)
	}
}

// handshake runs the TLS client handshake on conn, offering HTTP/2, with the
// host of addr as the server name unless cfg names one.
func handshake(ctx context.Context, conn net.Conn, addr string, cfg *tls.Config) (net.Conn, error) {
	host, _, _ := net.SplitHostPort(addr)
	if cfg == nil {
		cfg = &tls.Config{}
	}
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	if len(cfg.NextProtos) == 0 {
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	ctx, cancel := context.WithTimeout(ctx, tlsHandshakeTimeout)
	defer cancel()
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close() // the handshake error is the one that matters
		return nil, err
	}
	return tc, nil
}
