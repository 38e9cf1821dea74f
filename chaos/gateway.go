package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// GatewayConfig is how a `wamux serve` child is started.
type GatewayConfig struct {
	// Bin is the wamux binary.
	Bin     string
	DataDir string
	// Store is the --store flag: empty for SQLite in DataDir, or a
	// PostgreSQL URL.
	Store string
	// Env is added to the child's environment (WAMUX_API_KEYS and the
	// like).
	Env []string
	// Args are added to the serve command line (--kafka, --node-id).
	Args []string
}

// Gateway is a running `wamux serve` process.
type Gateway struct {
	cmd    *exec.Cmd
	Base   string // http://host:port
	stderr *lockedText
	done   chan error
}

type lockedText struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedText) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 { // keep the head: the first errors say most
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedText) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// StartGateway runs `wamux serve` on a free loopback port and returns once
// it prints its listen line.
func StartGateway(ctx context.Context, cfg GatewayConfig) (*Gateway, error) {
	args := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", cfg.DataDir}
	if cfg.Store != "" {
		args = append(args, "--store", cfg.Store)
	}
	args = append(args, cfg.Args...)
	cmd := exec.Command(cfg.Bin, args...)
	cmd.Env = append(os.Environ(), cfg.Env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	g := &Gateway{cmd: cmd, stderr: &lockedText{}, done: make(chan error, 1)}
	cmd.Stderr = g.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start wamux serve: %w", err)
	}
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "wamux: listening on "); ok {
				listening <- a
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		g.done <- cmd.Wait()
	}()
	select {
	case a := <-listening:
		g.Base = a
		if !strings.HasPrefix(a, "http") {
			g.Base = "http://" + a
		}
		return g, nil
	case err := <-g.done:
		g.done <- err
		return nil, fmt.Errorf("wamux serve exited before listening: %v\n%s", err, g.stderr.String())
	case <-ctx.Done():
		g.Kill()
		return nil, fmt.Errorf("wamux serve did not print its address: %w\n%s", ctx.Err(), g.stderr.String())
	}
}

// Kill sends SIGKILL and waits for the process to end.
func (g *Gateway) Kill() {
	_ = g.cmd.Process.Signal(syscall.SIGKILL)
	err := <-g.done
	g.done <- err
}

// Stop sends SIGTERM and waits for the process to end; its exit error.
func (g *Gateway) Stop() error {
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	err := <-g.done
	g.done <- err
	return err
}

// Stderr is what the process wrote to stderr.
func (g *Gateway) Stderr() string { return g.stderr.String() }

var client = &http.Client{Timeout: 30 * time.Second}

// Reply is a gateway's answer to one request.
type Reply struct {
	Code   int
	Header http.Header
	Body   []byte
}

// Do makes one API request with key.
func (g *Gateway) Do(ctx context.Context, key, method, path, body string) (Reply, error) {
	req, err := http.NewRequestWithContext(ctx, method, g.Base+path, strings.NewReader(body))
	if err != nil {
		return Reply{}, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := client.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	return Reply{Code: res.StatusCode, Header: res.Header, Body: raw}, err
}

// Call makes one API request with key and returns status and body.
func (g *Gateway) Call(ctx context.Context, key, method, path, body string) (int, []byte, error) {
	rep, err := g.Do(ctx, key, method, path, body)
	return rep.Code, rep.Body, err
}
