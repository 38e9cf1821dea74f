package agent

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
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

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		childEnv+"=report",
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
	exited := false
	t.Cleanup(func() {
		_ = stdin.Close()
		if !exited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("child stderr:\n%s", stderr.String())
		}
	})

	durable := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			durable <- sc.Text()
			return
		}
		close(durable)
	}()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	select {
	case line := <-durable:
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

	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("kill child: %v", err)
	}
	err = cmd.Wait()
	exited = true
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.Exited() {
		t.Fatalf("child ended with %v, want killed by a signal", err)
	}
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
