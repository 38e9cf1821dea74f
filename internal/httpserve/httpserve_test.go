package httpserve_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/wamux/wamux/internal/httpserve"
)

func start(t *testing.T, maxConns int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := httpserve.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), maxConns, nil)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		_ = s.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// get sends one keep-alive request on c and reads its answer.
func get(t *testing.T, c net.Conn, br *bufio.Reader) *http.Response {
	t.Helper()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestConnectionBeyondTheCapWaits: with a cap of one, a second
// connection's request is answered only once the first connection closes.
func TestConnectionBeyondTheCapWaits(t *testing.T) {
	addr := start(t, 1)
	first, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	get(t, first, bufio.NewReader(first)) // accepted: it holds the one slot

	second, err := net.Dial("tcp", addr) // completes in the kernel backlog
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	answered := make(chan *http.Response, 1)
	go func() {
		_, _ = io.WriteString(second, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(second), nil)
		if err == nil {
			resp.Body.Close()
		}
		answered <- resp
	}()
	// The first connection is the one open; at the cap keep-alive is off,
	// so it was closed once idle, freeing the slot for the second.
	if n, err := first.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("the first connection at the cap stayed open: %d, %v", n, err)
	}
	first.Close()
	if resp := <-answered; resp == nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("second connection: %v, want 200 once the first closed", resp)
	}
}

// TestIdleKeepAlivesClosedNearTheCap: idle keep-alive connections are
// closed when the open ones reach 90 % of the cap, and keep-alive resumes
// under half of it.
func TestIdleKeepAlivesClosedNearTheCap(t *testing.T) {
	addr := start(t, 10)
	var conns []net.Conn
	for range 8 { // under 90 % of 10: all stay open
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if resp := get(t, c, bufio.NewReader(c)); resp.Close {
			t.Fatal("keep-alive off under 90 % of the cap")
		}
		conns = append(conns, c)
	}
	ninth, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ninth.Close()
	// The ninth reaches 90 %: the eight idle ones are closed.
	for i, c := range conns {
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Fatalf("idle connection %d stayed open at 90 %% of the cap: %d, %v", i, n, err)
		}
		c.Close()
	}
	// Once they are gone (the ninth alone is open), keep-alive is back: a
	// tenth connection's answer keeps it open after the ninth closed.
	ninth.Close()
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		resp := get(t, c, bufio.NewReader(c))
		c.Close()
		if !resp.Close {
			return
		}
		// Still counting the closed ones down; each answer waits for the
		// server, so this loop advances with it.
	}
}
