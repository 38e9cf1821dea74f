package outbound_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
)

// logCapture keeps every record a logger handles, with its attributes.
type logCapture struct {
	mu   sync.Mutex
	recs []capturedRecord
}

type capturedRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *logCapture) WithGroup(string) slog.Handler            { return c }

func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	rec := capturedRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.Resolve().String()
		return true
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, rec)
	return nil
}

// lines returns the records with message msg.
func (c *logCapture) lines(msg string) []capturedRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []capturedRecord
	for _, r := range c.recs {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// all renders every record, attributes included.
func (c *logCapture) all() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, r := range c.recs {
		fmt.Fprintf(&b, "%s %s %v\n", r.level, r.msg, r.attrs)
	}
	return b.String()
}

// TestThrottleAnswersLoggedOncePerCooldown: the provider answers 130429
// three times and 131056 twice for account a, and 130429 once for account
// b. Each account and code gets one Warn line naming them, never the
// token; the next 130429 of a after cooldown_min gets another, saying how
// many came in between unlogged.
func TestThrottleAnswersLoggedOncePerCooldown(t *testing.T) {
	clk := fakeclock.New() // frozen: refused messages wait for the test to move it
	throughput := cloudapi.Result{Outcome: cloudapi.SlowDown, Code: 130429, Delay: cloudapi.ThroughputDelay, HTTPStatus: 400, Reason: "130429: rate limit hit"}
	pair := cloudapi.Result{Outcome: cloudapi.PairLimit, Code: 131056, Delay: cloudapi.PairLimitDelay, HTTPStatus: 400, Reason: "131056: pair rate limit hit"}
	script := map[string]cloudapi.Result{"15557400009": throughput, "15557410001": throughput}
	for i := range 3 {
		script[fmt.Sprintf("1555740000%d", i)] = throughput
	}
	for i := range 2 {
		script[fmt.Sprintf("1555740100%d", i)] = pair
	}
	sp, wrap := newScripted(script)
	logs := &logCapture{}
	e := newEnv(t, envOpts{clock: clk, provider: wrap, logger: slog.New(logs), settings: map[string]string{"cooldown_min": "10s"}})
	e.addAccount("a", "7400", 100, 10, sim.Limits{Rate: 1000})
	e.addAccount("b", "7410", 100, 10, sim.Limits{Rate: 1000})
	for _, to := range []string{"15557400000", "15557400001", "15557400002", "15557401000", "15557401001"} {
		e.submit(textMsg(t, admit.Request{AccountID: "a", To: to}))
	}
	e.submit(textMsg(t, admit.Request{AccountID: "b", To: "15557410001"}))
	testwait.For(t, "six refusals answered", 10*time.Second, func() bool {
		return sp.total.Load() == 6 && e.d.AttemptsRunning("a") == 0 && e.d.AttemptsRunning("b") == 0
	})

	const msg = "provider throttled the account"
	count := func() map[string]int {
		n := map[string]int{}
		for _, r := range logs.lines(msg) {
			if r.level != slog.LevelWarn {
				t.Fatalf("throttle logged at %s, want WARN", r.level)
			}
			n[r.attrs["account_id"]+"/"+r.attrs["code"]]++
		}
		return n
	}
	if got, want := count(), map[string]int{"a/130429": 1, "a/131056": 1, "b/130429": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("throttle lines by account/code %v, want %v\n%s", got, want, logs.all())
	}
	if strings.Contains(logs.all(), "token-") {
		t.Fatalf("an access token reached the log:\n%s", logs.all())
	}

	clk.Advance(10 * time.Second)
	e.d.Kick()
	e.submit(textMsg(t, admit.Request{AccountID: "a", To: "15557400009"}))
	testwait.For(t, "a second 130429 line for a", 10*time.Second, func() bool { return count()["a/130429"] == 2 })
	lines := logs.lines(msg)
	var last capturedRecord
	for _, r := range lines {
		if r.attrs["account_id"] == "a" && r.attrs["code"] == "130429" {
			last = r
		}
	}
	if last.attrs["since_last_logged"] != "2" {
		t.Fatalf("the line after cooldown_min says %s answers came unlogged, want 2: %v", last.attrs["since_last_logged"], last.attrs)
	}
	if got := count(); got["a/131056"] != 1 || got["b/130429"] != 1 {
		t.Fatalf("throttle lines by account/code %v after the second 130429 of a", got)
	}
}
