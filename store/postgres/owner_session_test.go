package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/postgres"
)

// sessionStart is backend pid's backend_start.
func sessionStart(t *testing.T, s *postgres.Store, pid uint32) time.Time {
	t.Helper()
	var start time.Time
	if err := s.Pool().QueryRow(t.Context(), "SELECT backend_start FROM pg_stat_activity WHERE pid = $1", int64(pid)).Scan(&start); err != nil {
		t.Fatalf("backend_start of pid %d: %v", pid, err)
	}
	return start
}

// alive says whether backend pid still runs.
func alive(t *testing.T, s *postgres.Store, pid uint32) bool {
	t.Helper()
	var ok bool
	if err := s.Pool().QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", int64(pid)).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestClaimLostToReusedPID: the server's pids are the OS's, so the claim's
// broken lock session may be gone and its pid reused by another gateway's
// session that took the lock. The claim must take that session for
// another's, not its own: it reports the claim lost and leaves the other
// session, and its lock, alone. The server cannot be made to reuse a pid,
// so the claim is told its session had the other session's pid and an
// earlier start.
func TestClaimLostToReusedPID(t *testing.T) {
	a, _, schema := claimStores(t, 20*time.Millisecond)
	ca, err := a.Claim(t.Context())
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	defer ca.Release()
	old := lockHolder(t, a, schema)
	otherPID, locked := waitingForLock(t, a, schema)
	postgres.SetClaimSession(ca, otherPID, sessionStart(t, a, otherPID).Add(-time.Hour))
	terminate(t, a, old)
	if err := <-locked; err != nil {
		t.Fatalf("other session's lock: %v", err)
	}
	testwait.For(t, "the claim lost, or the other session ended", 30*time.Second, func() bool {
		select {
		case <-ca.Lost():
			return true
		default:
			return !alive(t, a, otherPID)
		}
	})
	if !alive(t, a, otherPID) {
		t.Fatalf("the claim ended the other session (pid %d) that took the lock", otherPID)
	}
	if got := lockHolder(t, a, schema); got != otherPID {
		t.Fatalf("lock holder %d, want the other session %d", got, otherPID)
	}
	select {
	case <-ca.Lost():
	default:
		t.Fatal("claim not lost")
	}
	if err := ca.Err(); !errors.Is(err, store.ErrInUse) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", otherPID)) {
		t.Fatalf("lost claim's error: %v, want ErrInUse naming pid %d", err, otherPID)
	}
}

// TestClaimTerminatesOnlyItsSession: a claim ends its broken session by
// pid and start in one statement, so a session that took the pid after
// the check that the lock is still its own is not ended.
func TestClaimTerminatesOnlyItsSession(t *testing.T) {
	s := newStore(t)
	other, err := pgx.Connect(t.Context(), testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	var pid uint32
	if err := other.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	start := sessionStart(t, s, pid)
	ended, err := postgres.TerminateClaimSession(t.Context(), s, pid, start.Add(-time.Hour))
	if err != nil || ended {
		t.Fatalf("terminate pid %d with an earlier start: ended %v, %v; want not ended", pid, ended, err)
	}
	if err := other.Ping(t.Context()); err != nil {
		t.Fatalf("other session after a terminate of an earlier start: %v", err)
	}
	ended, err = postgres.TerminateClaimSession(t.Context(), s, pid, start)
	if err != nil || !ended {
		t.Fatalf("terminate pid %d with its start: ended %v, %v; want ended", pid, ended, err)
	}
	testwait.For(t, "the session to end", 30*time.Second, func() bool { return !alive(t, s, pid) })
}

// cutProxy forwards TCP connections to the server and can cut one on the
// client's side only: the client sees its connection break while the
// server keeps the session, and its locks, as after a network cut it has
// not noticed yet.
type cutProxy struct {
	ln     net.Listener
	server string
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[int]net.Conn // client side, by the server side's local port
	all   []net.Conn
}

func newCutProxy(t *testing.T, server string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, server: server, conns: map[int]net.Conn{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.all {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.server)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns[server.LocalAddr().(*net.TCPAddr).Port] = client
		p.all = append(p.all, client, server)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(server, client) }()
		go func() { defer p.wg.Done(); _, _ = io.Copy(client, server) }()
	}
}

// cut closes the client side of the connection whose server side has
// local port port (the session's client_port).
func (p *cutProxy) cut(t *testing.T, port int) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.conns[port]
	if !ok {
		t.Fatalf("no proxied connection from port %d", port)
	}
	c.Close()
}

// TestClaimEndsItsBrokenSession: when the lock connection broke on the
// client's side only, the server still has the session holding the lock.
// The claim finds the lock held by that session, its own by pid and start,
// ends it and takes the lock again: not lost.
func TestClaimEndsItsBrokenSession(t *testing.T) {
	first := newStore(t) // owns the schema and its cleanup
	var schema string
	if err := first.Pool().QueryRow(t.Context(), "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	p := newCutProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	a, err := postgres.Open(t.Context(), u.String(), postgres.Options{Schema: schema, OwnerCheck: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("open through the proxy: %v", err)
	}
	defer a.Close()
	ca, err := a.Claim(t.Context())
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	defer ca.Release()
	old := lockHolder(t, first, schema)
	var port int
	if err := first.Pool().QueryRow(t.Context(), "SELECT client_port FROM pg_stat_activity WHERE pid = $1", int64(old)).Scan(&port); err != nil {
		t.Fatal(err)
	}
	p.cut(t, port)
	testwait.For(t, "the lock taken again", 30*time.Second, func() bool {
		notLost(t, ca)
		pid := lockHolder(t, first, schema)
		return pid != 0 && pid != old
	})
	notLost(t, ca)
	testwait.For(t, "the broken session to end", 30*time.Second, func() bool { return !alive(t, first, old) })
}
