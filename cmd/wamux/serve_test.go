package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wamux/wamux/app"
	"github.com/wamux/wamux/config"
	"github.com/wamux/wamux/internal/seal"
	"github.com/wamux/wamux/store/sqlite"
)

// TestMain lets the tests run this very binary's main() in a child process
// (the test binary contains the wamux command), so a child can be signalled
// or killed with -9 like the real thing. Run as tests, the goroutines of
// the commands run in process (sim, demo, bench) must all have ended when
// the tests do.
func TestMain(m *testing.M) {
	if os.Getenv("WAMUX_TEST_RUN_MAIN") == "1" {
		main()
		return
	}
	goleak.VerifyTestMain(m)
}

const (
	childKey   = "child-api-key-0123456789"
	childToken = "EAAGchildSECRETtoken0123456789"
	// childSecretKey seals the children's secrets at rest (a fixed test
	// key, base64 of 32 bytes).
	childSecretKey = "Y2hpbGQtc2VjcmV0LWtleS0wMTIzNDU2Nzg5YWJjZGU="
)

// openData opens the store of a child's data dir, as the child did.
func openData(t *testing.T, dataDir string) *sqlite.Store {
	t.Helper()
	keys, err := seal.FromEnvOrFile(childSecretKey, "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(dataDir, app.SQLiteFile), sqlite.Options{Sealer: keys})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

type child struct {
	cmd    *exec.Cmd
	base   string
	stderr *lockedBuffer
	done   chan error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startChild runs `wamux serve args…` in dir and waits for its listen line.
func startChild(t *testing.T, dir string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"serve"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "WAMUX_TEST_RUN_MAIN=1", "WAMUX_API_KEYS="+childKey, "WAMUX_SECRET_KEY="+childSecretKey, "WAMUX_LOG_LEVEL=debug")
	return startCmd(t, cmd)
}

// startCmd starts a prepared `wamux serve` child and waits for its listen
// line.
func startCmd(t *testing.T, cmd *exec.Cmd) *child {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-c.done
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "wamux: listening on "); ok {
				addr <- a
			}
		}
		io.Copy(io.Discard, stdout)
		c.done <- cmd.Wait()
	}()
	select {
	case c.base = <-addr:
	case err := <-c.done:
		c.done <- err
		t.Fatalf("wamux serve exited before listening: %v\n%s", err, c.stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("wamux serve did not print its address\n%s", c.stderr.String())
	}
	return c
}

func (c *child) request(method, path, key, body string) (int, string, error) {
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	return res.StatusCode, string(raw), err
}

func (c *child) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-c.done:
		c.done <- err
		if err == nil {
			return 0
		}
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		t.Fatalf("wait: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("wamux serve did not exit")
	}
	return -1
}

// TestServeWithNoConfiguration: no file, no flags but a free port; the
// embedded default works, keeps its data in ./data, refuses /v1 without a
// key, never shows the access token, and exits 0 on SIGTERM.
func TestServeWithNoConfiguration(t *testing.T) {
	dir := t.TempDir()
	c := startChild(t, dir, "--listen", "127.0.0.1:0")
	if code, _, err := c.request("GET", "/healthz", "", ""); err != nil || code != 200 {
		t.Fatalf("/healthz = %d, %v", code, err)
	}
	if code, body, _ := c.request("GET", "/v1/accounts", "", ""); code != 401 || !strings.Contains(body, `"unauthorized"`) {
		t.Fatalf("/v1/accounts without a key = %d %s", code, body)
	}
	account := `{"id":"a1","phone_number_id":"1065","access_token":"` + childToken + `"}`
	code, body, err := c.request("POST", "/v1/accounts", childKey, account)
	if err != nil || code != 201 {
		t.Fatalf("create account = %d %s %v", code, body, err)
	}
	var seen strings.Builder
	seen.WriteString(body)
	for _, p := range []string{"/v1/accounts", "/v1/accounts/a1", "/metrics"} {
		_, body, _ := c.request("GET", p, childKey, "")
		seen.WriteString(body)
	}
	if _, err := os.Stat(filepath.Join(dir, config.DataDirDefault, app.SQLiteFile)); err != nil {
		t.Fatalf("the default data dir was not used: %v", err)
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := c.wait(t); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d\n%s", code, c.stderr.String())
	}
	logs := c.stderr.String()
	if !strings.Contains(logs, "wamux stopped") {
		t.Fatalf("no orderly shutdown in the log:\n%s", logs)
	}
	for where, text := range map[string]string{"responses": seen.String(), "logs": logs} {
		if strings.Contains(text, childToken) || strings.Contains(text, childKey) {
			t.Fatalf("a secret appears in the %s", where)
		}
	}
}

// TestKill9LosesNothingAcknowledged: clients create accounts as fast as they
// can; the server is killed with SIGKILL mid-stream; every account that got
// a 2xx must be in the database afterwards.
func TestKill9LosesNothingAcknowledged(t *testing.T) {
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	c := startChild(t, dir, "--listen", "127.0.0.1:0", "--data-dir", dataDir)

	acked := floodThenKill(t, c, 8, 300, func(ctx context.Context, w, i int) (string, bool, error) {
		id := fmt.Sprintf("w%d-%d", w, i)
		body := fmt.Sprintf(`{"id":%q,"phone_number_id":"%d%06d","access_token":"tok"}`, id, w+1, i)
		code, _, err := c.request("POST", "/v1/accounts", childKey, body)
		return id, code == 201, err
	})

	st := openData(t, dataDir)
	defer st.Close()
	for _, id := range acked {
		if _, err := st.GetAccount(context.Background(), id); err != nil {
			t.Fatalf("account %s was acknowledged but is gone after kill -9: %v", id, err)
		}
	}
	t.Logf("%d acknowledged accounts survived kill -9", len(acked))
}

// floodThenKill has clients call send (client w, its i-th call) until the
// server has acknowledged minAcked calls, then kills the server with
// SIGKILL while they are still sending, and returns the keys of the
// acknowledged calls. send reports its key, whether the server
// acknowledged it, and an error once the server is gone.
func floodThenKill(t *testing.T, c *child, clients, minAcked int,
	send func(ctx context.Context, w, i int) (key string, acked bool, err error)) []string {
	t.Helper()
	var (
		mu     sync.Mutex
		acked  []string
		count  atomic.Int64
		enough = make(chan struct{})
		once   sync.Once
		wg     sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				key, ok, err := send(ctx, w, i)
				if err != nil {
					return // the server is gone
				}
				if ok {
					mu.Lock()
					acked = append(acked, key)
					mu.Unlock()
					if count.Add(1) >= int64(minAcked) {
						once.Do(func() { close(enough) })
					}
				}
			}
		}(w)
	}
	select {
	case <-enough:
	case <-time.After(2 * time.Minute):
		t.Fatalf("only %d calls acknowledged\n%s", count.Load(), c.stderr.String())
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.wait(t)
	cancel()
	wg.Wait()
	return acked
}

func TestUnknownCommand(t *testing.T) {
	var out, errOut strings.Builder
	if code := run(context.Background(), []string{"frobnicate"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "unknown command") {
		t.Fatalf("code %d, stderr %q", code, errOut.String())
	}
	if code := run(context.Background(), []string{"--help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "serve") {
		t.Fatalf("help: code %d, stdout %q", code, out.String())
	}
}

// TestServeNeedsSecretKey: without WAMUX_SECRET_KEY `wamux serve` exits 2
// saying what to set, before it creates anything; with --insecure-dev it
// starts on a generated key file (0600) in the data dir and warns.
func TestServeNeedsSecretKey(t *testing.T) {
	t.Setenv("WAMUX_SECRET_KEY", "")
	dataDir := filepath.Join(t.TempDir(), "data")
	var out, errOut strings.Builder
	code := run(context.Background(), []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir}, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "WAMUX_SECRET_KEY") || !strings.Contains(errOut.String(), "--insecure-dev") {
		t.Fatalf("serve without a secret key: exit %d\n%s", code, errOut.String())
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("serve without a secret key touched the data dir: %v", err)
	}

	cmd := exec.Command(os.Args[0], "serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--insecure-dev")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WAMUX_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "WAMUX_TEST_RUN_MAIN=1", "WAMUX_API_KEYS="+childKey)
	c := startCmd(t, cmd)
	if !strings.Contains(c.stderr.String(), "--insecure-dev") || !strings.Contains(c.stderr.String(), "level=WARN") {
		t.Errorf("no warning about --insecure-dev in the log:\n%s", c.stderr.String())
	}
	info, err := os.Stat(filepath.Join(dataDir, app.SecretKeyFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v; want mode 0600", info, err)
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := c.wait(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, c.stderr.String())
	}
}
