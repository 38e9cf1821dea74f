package outbound_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
)

// logBuffer collects the dispatcher's JSON log lines; workers write from
// their own goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// pacedLines returns the Info lines reporting a paced send, by msg_id.
func (b *logBuffer) pacedLines(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if msg, _ := rec["msg"].(string); strings.Contains(msg, "paced") {
			id, _ := rec["msg_id"].(string)
			if _, twice := out[id]; twice {
				t.Fatalf("paced logged twice for %s", id)
			}
			out[id] = rec
		}
	}
	return out
}

func templateMsg(t *testing.T, account, to string) wamux.Message {
	t.Helper()
	return textMsg(t, admit.Request{AccountID: account, To: to, Type: "template",
		Template: json.RawMessage(`{"name":"order_update","language":{"code":"en_US"}}`)})
}

// TestPacedSendsCountedAndResolvedByLateStatuses: the simulator paces
// every template (held_for_quality_assessment, statuses after a hold).
// Each paced send is counted in wamux_sends_paced_total and logged at Info
// with its account, msg_id and wamid (no token), is sent exactly once, and
// its late status webhooks, through the real /webhook and receipt
// pipeline, still resolve it to delivered. The text message beside them is
// not paced and not counted.
func TestPacedSendsCountedAndResolvedByLateStatuses(t *testing.T) {
	clk := fakeclock.New()
	hook := &lateHandler{}
	hs := httptest.NewServer(hook)
	t.Cleanup(hs.Close)
	logs := &logBuffer{}
	e := newEnv(t, envOpts{
		clock: clk,
		simCfg: sim.Config{Faults: sim.Faults{Paced: 1, PacedHold: 50 * time.Millisecond},
			Webhooks: sim.Webhooks{URL: hs.URL + "/webhook", AppSecret: hookSecret, RetryBase: time.Millisecond, RetryMax: 10 * time.Millisecond}},
		settings: map[string]string{"quiet_period": "1m"},
		logger:   slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	serveWebhooks(t, e, hook)()
	e.addAccount("acc", "3901", 100, 10, sim.Limits{Rate: 1000})
	tpls := []wamux.Message{templateMsg(t, "acc", "15553901001"), templateMsg(t, "acc", "15553901002"), templateMsg(t, "acc", "15553901003")}
	txt := textMsg(t, admit.Request{AccountID: "acc", To: "15553901004"})
	e.submit(append(tpls, txt)...)

	all := append(append([]wamux.Message(nil), tpls...), txt)
	testwait.For(t, "every message delivered by its status webhooks", 10*time.Second, func() bool {
		for _, m := range all {
			if e.status(m.ID) != wamux.StatusDelivered {
				return false
			}
		}
		return true
	})

	// A status may resolve a message before its send's answer is
	// recorded, and an acceptance is counted once recorded.
	testwait.For(t, "every send's answer recorded", 10*time.Second, func() bool { return e.d.AttemptsRunning("acc") == 0 })
	if got := metric(t, e, "wamux_sends_paced_total", map[string]string{"account": "acc"}); got != 3 {
		t.Fatalf("wamux_sends_paced_total{account=acc} = %v, want 3 (the templates)", got)
	}
	if got := metric(t, e, "wamux_sends_total", map[string]string{"account": "acc", "result": "accepted"}); got != 4 {
		t.Fatalf("accepted sends %v, want 4", got)
	}
	st := e.sim.Stats().Totals
	if st.Requests != 4 || st.Accepted != 4 || st.Duplicates != 0 || st.Faults["paced"] != 3 {
		t.Fatalf("simulator: %+v; want 4 requests, each accepted once, 3 paced", st)
	}
	byCallback := map[string]sim.Message{}
	for _, sm := range e.sim.Messages("3901", "") {
		byCallback[sm.CallbackData] = sm
	}
	lines := logs.pacedLines(t)
	for _, m := range all {
		got, err := e.store.GetMessage(context.Background(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		sm := byCallback[m.ID]
		if got.WAMID == "" || got.WAMID != sm.WAMID || got.Attempts != 1 || sm.Paced != (m.Type == "template") {
			t.Fatalf("%s (%s): wamid %q, attempts %d; simulator %+v", m.ID, m.Type, got.WAMID, got.Attempts, sm)
		}
		rec, logged := lines[m.ID]
		if logged != sm.Paced {
			t.Fatalf("%s: paced %v but logged %v", m.ID, sm.Paced, logged)
		}
		if logged && (rec["level"] != "INFO" || rec["account_id"] != "acc" || rec["wamid"] != sm.WAMID) {
			t.Fatalf("%s: log line %v", m.ID, rec)
		}
	}
	if strings.Contains(logs.String(), "token-acc") {
		t.Fatal("the access token is in the logs")
	}
}

// TestPacedDroppedNotResent: Meta drops every paced template, so no status
// ever comes. The messages stay accepted, counted as paced, and are not
// sent again however long after the quiet period: compensation is for
// unknown outcomes, and a paced send had a clear one. A message with an
// unknown outcome on the same account shows that compensation did run.
func TestPacedDroppedNotResent(t *testing.T) {
	clk := fakeclock.New()
	e := newEnv(t, envOpts{
		clock:    clk,
		simCfg:   sim.Config{Faults: sim.Faults{Paced: 1, PacedDrop: 1}},
		settings: map[string]string{"quiet_period": "1m"},
	})
	e.addAccount("acc", "3902", 100, 10, sim.Limits{Rate: 1000})
	tpls := []wamux.Message{templateMsg(t, "acc", "15553902001"), templateMsg(t, "acc", "15553902002")}
	e.submit(tpls...)
	e.waitAccepted(2, 10*time.Second)
	testwait.For(t, "templates accepted", 10*time.Second, func() bool {
		return e.status(tpls[0].ID) == wamux.StatusAccepted && e.status(tpls[1].ID) == wamux.StatusAccepted
	})
	if got := metric(t, e, "wamux_sends_paced_total", map[string]string{"account": "acc"}); got != 2 {
		t.Fatalf("wamux_sends_paced_total = %v, want 2", got)
	}

	// The sentinel: accepted by Meta but answered 500, an unknown outcome
	// that is resent once after the quiet period.
	if err := e.sim.SetFaults("3902", sim.Faults{ServerErrorAfterAccept: 1}); err != nil {
		t.Fatal(err)
	}
	probe := textMsg(t, admit.Request{AccountID: "acc", To: "15553902003"})
	e.submit(probe)
	testwait.For(t, "probe unknown", 10*time.Second, func() bool { return e.status(probe.ID) == wamux.StatusUnknown })
	if err := e.sim.SetFaults("3902", sim.Faults{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "probe resent and accepted", 10*time.Second, func() bool {
		clk.Advance(time.Minute)
		e.d.Kick()
		return e.status(probe.ID) == wamux.StatusAccepted
	})

	st := e.sim.Stats().Totals
	msgs := e.sim.Messages("3902", "")
	if st.Requests != 4 || st.Duplicates != 1 || len(msgs) != 4 || msgs[2].CallbackData != probe.ID || msgs[3].CallbackData != probe.ID || !msgs[3].Duplicate {
		t.Fatalf("simulator: requests %d, duplicates %d, messages %+v; want only the probe sent twice", st.Requests, st.Duplicates, msgs)
	}
	if got := metric(t, e, "wamux_resends_total", map[string]string{"outcome": "resent"}); got != 1 {
		t.Fatalf("resends %v, want 1 (the probe)", got)
	}
	byCallback := map[string]sim.Message{}
	for _, sm := range msgs[:2] {
		byCallback[sm.CallbackData] = sm
	}
	for _, m := range tpls {
		got, err := e.store.GetMessage(context.Background(), m.ID)
		if err != nil {
			t.Fatal(err)
		}
		sm := byCallback[m.ID]
		if !sm.Paced || !sm.PacedDropped || got.Status != wamux.StatusAccepted || got.WAMID == "" || got.WAMID != sm.WAMID || got.Attempts != 1 {
			t.Fatalf("%s: %s, wamid %q, attempts %d; simulator %+v", m.ID, got.Status, got.WAMID, got.Attempts, sm)
		}
	}
	if got := metric(t, e, "wamux_sends_paced_total", map[string]string{"account": "acc"}); got != 2 {
		t.Fatalf("wamux_sends_paced_total = %v after the quiet period, want still 2", got)
	}
}
