package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wamux/wamux"
)

// childEnv, when set, makes the test binary act as an agent process
// instead of running tests: the crash test re-executes itself this way, as
// Go's own os/exec tests do, so it can kill -9 a real agent.
const childEnv = "WAMUX_AGENT_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(childReport(mode == "stream"))
	}
	goleak.VerifyTestMain(m)
}

// childReport runs an agent against WAMUX_AGENT_TEST_URL on
// WAMUX_AGENT_TEST_SPOOL, reports WAMUX_AGENT_TEST_N receipts from four
// goroutines, prints "durable N" once every Report has returned, and then
// keeps delivering until it is killed (or its stdin closes). With stream
// set it also prints "ok I" as soon as the Report of receipt I returns.
func childReport(stream bool) int {
	n, err := strconv.Atoi(os.Getenv("WAMUX_AGENT_TEST_N"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: bad N:", err)
		return 2
	}
	a, err := New(Config{
		GatewayURL:     os.Getenv("WAMUX_AGENT_TEST_URL"),
		APIKey:         testKey,
		AccountID:      testAccount,
		SpoolDir:       os.Getenv("WAMUX_AGENT_TEST_SPOOL"),
		BackoffBase:    time.Millisecond,
		BackoffCap:     5 * time.Millisecond,
		RequestTimeout: time.Hour, // a hanging gateway holds the batch until the kill
		MaxBatch:       100,       // the first batch never holds everything
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: new:", err)
		return 2
	}
	rs := testReceipts("crash", n)
	var wg sync.WaitGroup
	var outMu sync.Mutex
	errs := make(chan error, len(rs))
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(rs); i += 4 {
				if err := a.Report(context.Background(), rs[i]); err != nil {
					errs <- err
					continue
				}
				if stream {
					outMu.Lock()
					fmt.Printf("ok %d\n", i)
					outMu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		fmt.Fprintln(os.Stderr, "child: report:", err)
		return 2
	}
	fmt.Printf("durable %d\n", n)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// testReceipts returns n distinct receipts: two types for each message id,
// so uniqueness is on the whole triple and not on the id alone.
func testReceipts(prefix string, n int) []Receipt {
	types := []wamux.ReceiptType{wamux.ReceiptSent, wamux.ReceiptDelivered}
	rs := make([]Receipt, n)
	for i := range rs {
		rs[i] = Receipt{
			MessageID: fmt.Sprintf("wamid.%s.%04d", prefix, i/2),
			Type:      types[i%2],
			EventTime: time.UnixMilli(1_764_000_000_000 + int64(i)),
		}
		if i%3 == 1 { // the optional version: given for some, omitted for others
			rs[i].Version = wireVersion[rs[i].Type]
		}
	}
	return rs
}

// newTestAgent starts an agent on dir against g with fast retries; change
// adjusts the config. The agent is closed when the test ends.
func newTestAgent(t testing.TB, g *gateway, dir string, change func(*Config)) *Agent {
	t.Helper()
	cfg := Config{
		GatewayURL:     g.srv.URL,
		APIKey:         testKey,
		AccountID:      testAccount,
		SpoolDir:       dir,
		BackoffBase:    time.Millisecond,
		BackoffCap:     10 * time.Millisecond,
		RequestTimeout: 5 * time.Second,
		Logger:         slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError})),
	}
	if change != nil {
		change(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Close(ctx)
	})
	return a
}

func reportAll(t *testing.T, a *Agent, rs []Receipt) {
	t.Helper()
	for _, r := range rs {
		if err := a.Report(context.Background(), r); err != nil {
			t.Fatalf("Report(%s %s): %v", r.MessageID, r.Type, err)
		}
	}
}

func closeAgent(t testing.TB, a *Agent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}
