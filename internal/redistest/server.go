package redistest

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wamux/wamux/internal/testwait"
)

// Server is a redis-server of one test's own, on a port of its own, that
// the test can stop (as a crash: SIGKILL) and start again on the same
// port. It keeps nothing on disk, so a restart comes back empty, as a
// Redis without persistence does.
type Server struct {
	t    testing.TB
	bin  string
	addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartServer starts a redis-server for the test, which stops it when it
// ends. The test is skipped when Env is empty (no Redis is wanted) and
// fails when redis-server cannot be run.
func StartServer(t testing.TB) *Server {
	t.Helper()
	if os.Getenv(Env) == "" {
		t.Skip(Env + " is empty: no Redis to test against")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("%s is set but redis-server is not on PATH: %v", Env, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, bin: bin, addr: ln.Addr().String()}
	ln.Close()
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Start runs the server (again) and returns once it answers PING.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil {
		return
	}
	_, port, _ := net.SplitHostPort(s.addr)
	cmd := exec.Command(s.bin, "--bind", "127.0.0.1", "--port", port, "--save", "", "--appendonly", "no",
		"--dir", s.t.TempDir(), "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(s.done)
	rdb := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer rdb.Close()
	// redis-server gives no signal that it listens but its answer.
	testwait.ForNil(s.t, 10*time.Second, func() error {
		select {
		case <-s.done:
			return errors.New("redis-server on " + s.addr + " exited at start")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		return rdb.Ping(ctx).Err()
	})
}

// Stop kills the server, as a crash would, and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}
