// Package httpserve builds the HTTP servers of the gateway and the
// simulator with every phase of a connection bounded and a cap on the
// connections open at once, so that clients holding sockets cannot exhaust
// the process's file limit.
package httpserve

import (
	"log"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/netutil"
)

// Bounds of every server built here. WriteTimeout runs from the end of the
// headers: it leaves room for reading a body (ReadTimeout) and for a
// handler's own bound (the API's store timeout, 10 s).
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 60 * time.Second
	WriteTimeout      = 90 * time.Second
	IdleTimeout       = 120 * time.Second
	// MaxHeaderBytes bounds the request line and headers; past it Go's
	// server answers 431 itself, as plain text.
	MaxHeaderBytes = 64 << 10
	// minConns is the smallest cap DefaultMaxConns gives.
	minConns = 64
)

// DefaultMaxConns is half of the process's open-file limit
// (RLIMIT_NOFILE): the other half stays for the store, outbound
// connections and logs.
func DefaultMaxConns() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == 0 {
		return 1024
	}
	return max(minConns, int(min(lim.Cur, 1<<30)/2))
}

// Server is an http.Server with the bounds above whose connections are
// capped by Serve.
type Server struct {
	*http.Server
	maxConns int

	toggle    sync.Mutex // orders the calls of SetKeepAlivesEnabled
	mu        sync.Mutex
	open      int
	shedding  bool
	shedAbove int // open connections at which idle keep-alives are closed
	keepAbove int // open connections under which keep-alive resumes
}

// New builds a server for h that keeps at most maxConns connections open
// (DefaultMaxConns when not positive). errorLog may be nil.
func New(h http.Handler, maxConns int, errorLog *log.Logger) *Server {
	if maxConns <= 0 {
		maxConns = DefaultMaxConns()
	}
	s := &Server{maxConns: maxConns, shedAbove: max(1, maxConns*9/10), keepAbove: maxConns / 2}
	s.Server = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          errorLog,
		ConnState:         s.connState,
	}
	return s
}

// MaxConns is the cap on open connections.
func (s *Server) MaxConns() int { return s.maxConns }

// Serve accepts on ln at most MaxConns connections at a time; the next
// ones wait in the kernel's backlog until one closes.
func (s *Server) Serve(ln net.Listener) error {
	return s.Server.Serve(netutil.LimitListener(ln, s.maxConns))
}

// connState counts open connections. Near the cap (90 %) keep-alive is
// turned off, which closes the idle keep-alive connections at once and
// every other after its answer, so the cap's slots go to clients with a
// request; keep-alive resumes under half the cap.
func (s *Server) connState(_ net.Conn, state http.ConnState) {
	s.mu.Lock()
	switch state {
	case http.StateNew:
		s.open++
	case http.StateClosed, http.StateHijacked:
		s.open--
	default:
		s.mu.Unlock()
		return
	}
	change := false
	switch {
	case !s.shedding && s.open >= s.shedAbove:
		s.shedding, change = true, true
	case s.shedding && s.open < s.keepAbove:
		s.shedding, change = false, true
	}
	s.mu.Unlock()
	var enable bool
	if change {
		s.toggle.Lock()
		s.mu.Lock()
		enable = !s.shedding // the latest decision, whichever call got here first
		s.mu.Unlock()
		s.SetKeepAlivesEnabled(enable)
		s.toggle.Unlock()
	}
}
