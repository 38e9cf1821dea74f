package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/bench"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
)

// startServeAt runs `wamux serve` in a child on a fixed address (the
// simulator's webhooks must find the restarted gateway at the same place),
// with extra flags.
func startServeAt(t *testing.T, dir, addr, secret string, flags ...string) *child {
	t.Helper()
	args := append([]string{"serve", "--listen", addr, "--data-dir", filepath.Join(dir, "data")}, flags...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "WAMUX_TEST_RUN_MAIN=1", "WAMUX_API_KEYS="+childKey, "WAMUX_SECRET_KEY="+childSecretKey, "WAMUX_APP_SECRET="+secret, "WAMUX_LOG_LEVEL=warn",
		"WAMUX_PROVIDER_BASE_URLS=http://127.0.0.1") // the simulator, on any port
	return startCmd(t, cmd)
}

// TestKill9MidStreamEveryMessageOnce: a child gateway sends 400 ordered
// messages through the simulator; it is killed with SIGKILL while sends are
// in flight and restarted. Every message reaches the simulator exactly once
// and in order per recipient: messages that were with the provider at the
// kill come back as unknown and are resolved by the simulator's status
// webhooks (matched on biz_opaque_callback_data), not resent.
func TestKill9MidStreamEveryMessageOnce(t *testing.T) {
	dir := t.TempDir()
	addr := bench.FreePort()
	secret := "app-secret-0123456789"
	s, err := sim.New(sim.Config{
		Seed:   5,
		Faults: sim.Faults{Latency: sim.Range{Min: 5 * time.Millisecond, Max: 40 * time.Millisecond}},
		Webhooks: sim.Webhooks{URL: "http://" + addr + "/webhook", AppSecret: secret, BatchSize: 10,
			Delay:     sim.Range{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond},
			RetryBase: 100 * time.Millisecond, RetryMax: 500 * time.Millisecond, MaxAttempts: 100},
	})
	if err != nil {
		t.Fatal(err)
	}
	simURL, err := s.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.AddNumber(sim.Number{PhoneNumberID: "777001", AccessToken: "tok-777001",
		Limits: sim.Limits{Rate: 1000, PairInterval: time.Millisecond, PairBurst: 1000}}); err != nil {
		t.Fatal(err)
	}

	c := startServeAt(t, dir, addr, secret)
	must := func(code int, body string, err error) {
		t.Helper()
		if err != nil || code/100 != 2 {
			t.Fatalf("%d %s %v", code, body, err)
		}
	}
	must(c.request("POST", "/v1/accounts", childKey, fmt.Sprintf(
		`{"id":"acc","phone_number_id":"777001","access_token":"tok-777001","base_url":%q,"rate_per_sec":100,"burst":5}`, simURL)))
	// A long quiet period: the webhooks that resolve the in-flight messages
	// reach the restarted gateway well before it.
	must(c.request("PATCH", "/v1/config", childKey, `{"quiet_period":"8s","pair_interval":"1ms","pair_burst":1000}`))

	const n, recipients = 400, 20
	seqOf := map[string]int64{}
	var items []string
	for i := 1; i <= n; i++ {
		to := fmt.Sprintf("1555900%04d", i%recipients)
		items = append(items, fmt.Sprintf(`{"biz_type":"crash","account_id":"acc","client_seq":%d,"to":%q,"type":"text","text":{"body":"m%d"}}`, i, to, i))
		seqOf[wamux.DeriveMsgID("crash", "acc", int64(i))] = int64(i)
	}
	for i := 0; i < n; i += 100 {
		must(c.request("POST", "/v1/messages:batch", childKey, `{"messages":[`+strings.Join(items[i:i+100], ",")+`]}`))
	}
	testwait.For(t, "100 messages accepted before the kill", 60*time.Second, func() bool { return s.Stats().Totals.Accepted >= 100 })
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.wait(t)
	atKill := s.Stats().Totals.Accepted
	if atKill >= n {
		t.Fatalf("all %d were sent before the kill; the test proves nothing", n)
	}

	c2 := startServeAt(t, dir, addr, secret)
	testwait.ForNil(t, 90*time.Second, func() error {
		if st := s.Stats().Totals; st.Accepted-st.Duplicates < n {
			return fmt.Errorf("accepted %d unique of %d after restart (%d at kill)\n%s", st.Accepted-st.Duplicates, n, atKill, c2.stderr.String())
		}
		return nil
	})
	if d := s.Stats().Totals.Duplicates; d != 0 {
		t.Fatalf("%d messages reached the provider twice", d)
	}
	perRecipient := map[string]int64{}
	for _, m := range s.Messages("777001", "") {
		seq, ok := seqOf[m.CallbackData]
		if !ok {
			t.Fatalf("unknown callback data %q", m.CallbackData)
		}
		if seq <= perRecipient[m.To] {
			t.Fatalf("recipient %s: seq %d after %d", m.To, seq, perRecipient[m.To])
		}
		perRecipient[m.To] = seq
	}
	// The gateway's own view agrees: nothing is left unknown or queued.
	waitStatus := time.Now().Add(30 * time.Second)
	for id := range seqOf {
		testwait.ForNil(t, time.Until(waitStatus), func() error {
			_, body, err := c2.request("GET", "/v1/messages/"+id, childKey, "")
			var m struct{ Status string }
			if err == nil {
				json.Unmarshal([]byte(body), &m)
			}
			switch m.Status {
			case "accepted", "sent", "delivered", "read":
				return nil
			}
			return fmt.Errorf("message %s (seq %d) ended %q", id, seqOf[id], m.Status)
		})
	}
	inFlight := "none"
	for _, line := range strings.Split(c2.stderr.String(), "\n") {
		if strings.Contains(line, "now unknown") {
			inFlight = line
		}
	}
	t.Logf("%d accepted before the kill; all %d exactly once after the restart; in flight at the kill: %s", atKill, n, inFlight)
}
