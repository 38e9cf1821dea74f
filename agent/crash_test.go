package agent

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/wamux/wamux/store"
)

// TestKillBetweenSpoolAndAck kills -9 an agent process after its Reports
// returned but before the gateway acknowledged anything, then starts a new
// agent on the same spool against a healthy gateway: every receipt ends up
// in the store exactly once, and nothing else does.
func TestKillBetweenSpoolAndAck(t *testing.T) {
	const n = 300
	g := newGateway(t)
	// The first batch reaches the store but its ack is lost, twice; every
	// later request hangs. The child never sees an ack.
	g.setMode(gwHang, gwLoseAck, gwLoseAck)
	spoolDir := t.TempDir()

	child := startChild(t, "report", g, spoolDir, n)
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	select {
	case line := <-child.lines:
		if line != "durable "+strconv.Itoa(n) {
			t.Fatalf("child said %q", line)
		}
	case <-deadline.C:
		t.Fatal("child did not report its receipts durable in time")
	}
	select {
	case <-g.hanging:
	case <-deadline.C:
		t.Fatal("child never sent the request that hangs")
	}
	child.kill(t)

	stored := len(g.storedKeys(t))
	if stored == 0 || stored >= n {
		t.Fatalf("before restart the store holds %d receipts, want some but not all %d", stored, n)
	}

	g.setMode(gwOK)
	a := newTestAgent(t, g, spoolDir, nil)
	if got := a.Stats().Replayed; got != n {
		t.Errorf("Replayed = %d, want %d (nothing was acked)", got, n)
	}
	closeAgent(t, a)

	g.wantStored(t, testReceipts("crash", n))
	st := a.Stats()
	if st.Acked != n || st.Accepted != uint64(n-stored) || st.Duplicates != uint64(stored) {
		t.Errorf("Stats = %+v, want %d acked: %d accepted, %d duplicates", st, n, n-stored, stored)
	}
	if segs, _ := filepath.Glob(filepath.Join(spoolDir, "*.seg")); len(segs) != 0 {
		t.Errorf("spool still holds %v after everything was acked", segs)
	}
}

// TestKillWhileReporting kills -9 an agent process in the middle of a
// stream of Reports, after some batches were acked and while one hangs:
// every receipt whose Report returned reaches the store exactly once after
// a restart, and nothing foreign does.
func TestKillWhileReporting(t *testing.T) {
	const n = 2000
	g := newGateway(t)
	g.setMode(gwHang, gwOK, gwOK)
	spoolDir := t.TempDir()
	child := startChild(t, "stream", g, spoolDir, n)

	confirmed := make(map[int]bool)
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for len(confirmed) < n/2 {
		select {
		case line, ok := <-child.lines:
			if !ok {
				t.Fatal("child ended early")
			}
			var i int
			if _, err := fmt.Sscanf(line, "ok %d", &i); err != nil {
				t.Fatalf("child said %q", line)
			}
			confirmed[i] = true
		case <-deadline.C:
			t.Fatalf("child confirmed only %d receipts in time", len(confirmed))
		}
	}
	child.kill(t)

	g.setMode(gwOK)
	a := newTestAgent(t, g, spoolDir, nil)
	closeAgent(t, a)

	all := testReceipts("crash", n)
	valid := make(map[store.ReceiptKey]bool, n)
	for _, r := range all {
		valid[store.ReceiptKey{MessageID: r.MessageID, AccountID: testAccount, Type: r.Type}] = true
	}
	got := g.storedKeys(t)
	for k, c := range got {
		if !valid[k] || c != 1 {
			t.Errorf("store holds %v %d times", k, c)
		}
	}
	for i := range confirmed {
		k := store.ReceiptKey{MessageID: all[i].MessageID, AccountID: testAccount, Type: all[i].Type}
		if got[k] != 1 {
			t.Errorf("confirmed receipt %d (%v) is stored %d times, want once", i, k, got[k])
		}
	}
	t.Logf("%d confirmed before the kill, %d stored after the restart", len(confirmed), len(got))
}

// child is a re-executed test binary acting as an agent (see TestMain).
type child struct {
	cmd    *exec.Cmd
	lines  chan string // its stdout, line by line; closed at EOF
	exited bool
}

func startChild(t *testing.T, mode string, g *gateway, spoolDir string, n int) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		childEnv+"="+mode,
		"WAMUX_AGENT_TEST_URL="+g.srv.URL,
		"WAMUX_AGENT_TEST_SPOOL="+spoolDir,
		"WAMUX_AGENT_TEST_N="+strconv.Itoa(n),
	)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 64)}
	t.Cleanup(func() {
		_ = stdin.Close()
		if !c.exited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("child stderr:\n%s", stderr.String())
		}
	})
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	return c
}

// kill sends SIGKILL and checks that the child died of it.
func (c *child) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill child: %v", err)
	}
	// Let the stdout reader finish, so Wait does not race it.
	for range c.lines {
	}
	err := c.cmd.Wait()
	c.exited = true
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.Exited() {
		t.Fatalf("child ended with %v, want killed by a signal", err)
	}
}
