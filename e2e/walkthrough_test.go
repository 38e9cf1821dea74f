//go:build unix

package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wamux/wamux/internal/testwait"
)

// walkthroughBuild is the line of the walk-through that builds the binary;
// the test builds it itself, once, into the directory the shell runs in.
const walkthroughBuild = "go build -o wamux ./cmd/wamux"

// walkthroughShell is a bash reading the walk-through's blocks from a pipe
// in a directory that holds the built wamux, so the blocks share their
// variables and background jobs as they do in a reader's terminal.
type walkthroughShell struct {
	t     *testing.T
	dir   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	n     int
}

func startWalkthroughShell(t *testing.T, dir string) *walkthroughShell {
	t.Helper()
	cmd := exec.Command("bash", "--noprofile", "--norc", "-s")
	cmd.Dir = dir
	// The reader's shell has no WAMUX_* settings of its own.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WAMUX_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// Its own process group, so that the servers it starts in the
	// background end with it whatever the test's outcome.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout // the pipe's writing end: curl's and bash's errors show in the output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sh := &walkthroughShell{t: t, dir: dir, cmd: cmd, stdin: stdin, lines: make(chan string, 256)}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			sh.lines <- sc.Text()
		}
		close(sh.lines)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		for name, log := range map[string]string{"simulator": "sim.log", "gateway": "wamux.log"} {
			if raw, err := os.ReadFile(filepath.Join(dir, log)); err == nil && t.Failed() {
				t.Logf("%s log:\n%s", name, raw)
			}
		}
	})
	return sh
}

// run feeds one block to the shell and returns what it printed, once the
// shell has run all of it or the deadline has passed.
func (sh *walkthroughShell) run(ctx context.Context, block string) string {
	sh.t.Helper()
	sh.n++
	marker := fmt.Sprintf("--- end of block %d ---", sh.n)
	if _, err := io.WriteString(sh.stdin, block+"\necho '"+marker+"'\n"); err != nil {
		sh.t.Fatalf("block %d: %v", sh.n, err)
	}
	var out strings.Builder
	for {
		select {
		case l, ok := <-sh.lines:
			if !ok {
				sh.t.Fatalf("the shell ended during block %d:\n%s\noutput:\n%s", sh.n, block, out.String())
			}
			if l == marker {
				return out.String()
			}
			out.WriteString(l + "\n")
		case <-ctx.Done():
			sh.t.Fatalf("block %d did not finish: %v\n%s\noutput so far:\n%s", sh.n, ctx.Err(), block, out.String())
		}
	}
}

// freePort returns a loopback port nobody listens on right now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// walkthroughMessage is what the test reads of GET /v1/messages/{id}.
type walkthroughMessage struct {
	MsgID     string `json:"msg_id"`
	Status    string `json:"status"`
	Duplicate bool   `json:"duplicate"`
}

// jsonLines decodes every line of out that is a JSON object.
func jsonLines(t *testing.T, out string) []walkthroughMessage {
	t.Helper()
	var msgs []walkthroughMessage
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var m walkthroughMessage
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

var (
	messagePath = regexp.MustCompile(`/v1/messages/([A-Za-z0-9_-]+)`)
	exportedKey = regexp.MustCompile(`(?m)^export WAMUX_API_KEYS=([^ #\n]+)`)
)

// TestReadmeWalkthrough runs the README's walk-through as a reader would
// paste it into a shell: the binary built, the simulator and the gateway
// started in the background (on free ports instead of 8080 and 8090), the
// account created, a text and a template accepted (and a repeat of them
// answered as duplicates), their statuses read back once the simulator's
// webhooks have brought them to delivered or read, the dashboard served,
// and both servers stopped.
func TestReadmeWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs two servers")
	}
	for _, tool := range []string{"bash", "curl", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the walk-through needs %s: %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	section := section(t, readmeDoc, "## Five-minute walk-through")
	text := strings.Join(section, "\n")
	for _, p := range []string{":8080", ":8090"} {
		if !strings.Contains(text, p) {
			t.Fatalf("the walk-through no longer uses port %s; this test moves 8080 and 8090 to free ports", p)
		}
	}
	var blocks []string
	for _, b := range codeBlocks(section, "sh") {
		blocks = append(blocks, strings.Join(b, "\n"))
	}
	if len(blocks) < 5 {
		t.Fatalf("the walk-through has %d sh blocks; this test expects start, account, send, status, stop", len(blocks))
	}
	if !strings.HasPrefix(blocks[0], walkthroughBuild+"\n") {
		t.Fatalf("the walk-through starts without %q", walkthroughBuild)
	}
	blocks[0] = strings.TrimPrefix(blocks[0], walkthroughBuild+"\n")
	key := exportedKey.FindStringSubmatch(blocks[0])
	if key == nil {
		t.Fatal("the walk-through's first block exports no WAMUX_API_KEYS")
	}

	dir := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "wamux"), "./cmd/wamux")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", walkthroughBuild, err, out)
	}
	// The ports are picked after the build, so that little time passes
	// before the servers take them.
	gwPort, simPort := freePort(t), freePort(t)
	ports := strings.NewReplacer(":8080", ":"+gwPort, ":8090", ":"+simPort)
	for i := range blocks {
		blocks[i] = ports.Replace(blocks[i])
	}
	sh := startWalkthroughShell(t, dir)
	gateway := "http://127.0.0.1:" + gwPort

	// 1. Start: the block waits for the gateway itself.
	if out := sh.run(ctx, blocks[0]); !strings.Contains(out, `"status":"ready"`) {
		t.Fatalf("start block: the gateway did not report ready:\n%s", out)
	}
	// 2. The account.
	if out := sh.run(ctx, blocks[1]); !strings.Contains(out, `"id":"shop-1"`) || strings.Contains(out, `"error"`) {
		t.Fatalf("account block: no account created:\n%s", out)
	}
	// 3. The messages: accepted, and a repeat is a duplicate.
	sent := jsonLines(t, sh.run(ctx, blocks[2]))
	if len(sent) < 2 {
		t.Fatalf("send block: %d answers, want one per message: %v", len(sent), sent)
	}
	for _, m := range sent {
		if m.MsgID == "" || m.Status != "queued" || m.Duplicate {
			t.Errorf("send block: answer %+v, want a new queued message", m)
		}
	}
	for _, m := range jsonLines(t, sh.run(ctx, blocks[2])) {
		if !m.Duplicate {
			t.Errorf("send block again: %+v, want a duplicate", m)
		}
	}
	// 4. The statuses, once the simulator's webhooks have come back.
	ids := messagePath.FindAllStringSubmatch(blocks[3], -1)
	if len(ids) != len(sent) {
		t.Fatalf("status block reads %d messages; the send block sent %d", len(ids), len(sent))
	}
	for _, id := range ids {
		waitMessageStatus(ctx, t, gateway, key[1], id[1], "delivered", "read")
	}
	read := jsonLines(t, sh.run(ctx, blocks[3]))
	if len(read) != len(ids) {
		t.Fatalf("status block: %d answers for %d messages", len(read), len(ids))
	}
	for _, m := range read {
		if m.Status != "delivered" && m.Status != "read" {
			t.Errorf("status block: %s is %q, want delivered or read", m.MsgID, m.Status)
		}
	}
	// 5. The dashboard.
	res, err := http.Get(gateway + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Errorf("dashboard: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	// 6. Stop: both servers exit, the gateway with status 0.
	sh.run(ctx, blocks[len(blocks)-1])
	if out := sh.run(ctx, "wait %2; echo gateway exit $?; wait"); !strings.Contains(out, "gateway exit 0") {
		t.Errorf("the gateway did not exit 0 after the stop block:\n%s", out)
	}
}

// waitMessageStatus polls GET /v1/messages/{id} with the API key until
// its status is one of want, failing the test after 30 s.
func waitMessageStatus(ctx context.Context, t *testing.T, gateway, key, id string, want ...string) {
	t.Helper()
	testwait.ForNil(t, 30*time.Second, func() error {
		req, err := http.NewRequestWithContext(ctx, "GET", gateway+"/v1/messages/"+id, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		var m walkthroughMessage
		if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
			return fmt.Errorf("GET /v1/messages/%s: %d: %w", id, res.StatusCode, err)
		}
		if !slices.Contains(want, m.Status) {
			return fmt.Errorf("message %s is %q; want one of %v", id, m.Status, want)
		}
		return nil
	})
}
