package outbound_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/outbound"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
)

// TestAcceptedUnderHeldWAMIDIsNeverResent: the provider accepts a send
// under a wamid another message already holds (a restarted simulator
// handing out its wamids again), so the store refuses to record it. The
// provider has the message: it is stored accepted, without that wamid and
// with a last_error naming the conflict, logged and counted as
// wamux_sends_total{result="wamid_conflict"}, and neither this dispatcher
// nor one started afterwards on the same store sends it again.
func TestAcceptedUnderHeldWAMIDIsNeverResent(t *testing.T) {
	first, second := "15557301001", "15557301002"
	sp := &sequencedProvider{calls: map[string]int{}, answers: map[string][]cloudapi.Result{}}
	logs := &logBuffer{}
	clk := fakeclock.New()
	e := newEnv(t, envOpts{
		clock:    clk,
		settings: map[string]string{"quiet_period": "1m"},
		provider: func(base outbound.Provider) outbound.Provider { sp.base = base; return sp },
		logger:   slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	e.addAccount("acc", "7301", 100, 10, sim.Limits{Rate: 1000})
	a := textMsg(t, admit.Request{MsgID: "holder", AccountID: "acc", To: first})
	e.submit(a)
	testwait.For(t, "the first message accepted", 10*time.Second, func() bool { return e.status(a.ID) == wamux.StatusAccepted })
	held := e.message(a.ID).WAMID
	if held == "" {
		t.Fatal("the first message has no wamid")
	}

	sp.mu.Lock()
	sp.answers[second] = []cloudapi.Result{{Outcome: cloudapi.Accepted, WAMID: held, HTTPStatus: 200, Code: -1}}
	sp.mu.Unlock()
	b := textMsg(t, admit.Request{MsgID: "reused", AccountID: "acc", To: second})
	e.submit(b)
	testwait.For(t, "the second message's answer recorded", 10*time.Second, func() bool {
		return sp.callsTo(second) == 1 && e.status(b.ID) != wamux.StatusQueued && e.status(b.ID) != wamux.StatusSending &&
			e.d.AttemptsRunning("acc") == 0
	})
	e.d.Settle("acc")
	checkConflictRecorded(t, e, b.ID, held)
	if got := e.message(a.ID); got.WAMID != held || got.Status != wamux.StatusAccepted {
		t.Fatalf("the holder is %s with wamid %q, want accepted with %q", got.Status, got.WAMID, held)
	}
	if n := metric(t, e, "wamux_sends_total", map[string]string{"account": "acc", "result": "wamid_conflict"}); n != 1 {
		t.Fatalf("wamux_sends_total{result=wamid_conflict} = %v, want 1", n)
	}
	if n := metric(t, e, "wamux_sends_total", map[string]string{"account": "acc", "result": "accepted"}); n != 1 {
		t.Fatalf("wamux_sends_total{result=accepted} = %v, want 1 (the holder's send only)", n)
	}
	line := logs.lineWith("wamid another message holds")
	for _, want := range []string{`"msg_id":"reused"`, `"wamid":"` + held + `"`, `"holder_msg_id":"holder"`} {
		if !strings.Contains(line, want) {
			t.Fatalf("conflict log line %q lacks %s", line, want)
		}
	}

	// A restart on the same store neither resends it nor changes it, also
	// once a quiet period has passed (a message left sending would be
	// resent by then).
	e.stop()
	e.start()
	e.elapse(clk, 2*time.Minute)
	e.d.Settle("acc")
	testwait.For(t, "no attempt running", 10*time.Second, func() bool { return e.d.AttemptsRunning("acc") == 0 })
	if n := sp.callsTo(second); n != 1 {
		t.Fatalf("%d provider calls for the second message, want 1: it was sent again", n)
	}
	if st := e.sim.Stats().Totals; st.Requests != 1 || st.Duplicates != 0 {
		t.Fatalf("simulator saw %d requests, %d duplicates; want the holder's send only", st.Requests, st.Duplicates)
	}
	checkConflictRecorded(t, e, b.ID, held)
}

func checkConflictRecorded(t *testing.T, e *env, msgID, wamid string) {
	t.Helper()
	got := e.message(msgID)
	if got.Status != wamux.StatusAccepted || got.WAMID != "" {
		t.Fatalf("message %s with wamid %q, want accepted without a wamid", got.Status, got.WAMID)
	}
	if !strings.Contains(got.LastError, wamid) || !strings.Contains(got.LastError, "another message") {
		t.Fatalf("last_error %q does not name the conflict over %s", got.LastError, wamid)
	}
}

// lineWith returns the first logged line containing s ("" if none).
func (b *logBuffer) lineWith(s string) string {
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
