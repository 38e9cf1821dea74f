package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/bench"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/webhooksig"
)

const (
	crashKey       = "e2e-crash-key-0123456789"
	crashAppSecret = "e2e-crash-app-secret-0123"
)

// gateway is a `wamux serve` process.
type gateway struct {
	cmd    *exec.Cmd
	base   string
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
	return l.b.Write(p)
}

func (l *lockedText) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startGateway runs the binary as `wamux serve` on addr and dataDir and
// waits for its listen line.
func startGateway(t *testing.T, bin, addr, dataDir string) *gateway {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--listen", addr, "--data-dir", dataDir, "--insecure-dev")
	cmd.Env = append(os.Environ(), "WAMUX_API_KEYS="+crashKey, "WAMUX_APP_SECRET="+crashAppSecret,
		"WAMUX_EVENT_ALLOW_NETWORKS=127.0.0.0/8", "WAMUX_PROVIDER_BASE_URLS=http://127.0.0.1", "WAMUX_LOG_LEVEL=warn")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	g := &gateway{cmd: cmd, stderr: &lockedText{}, done: make(chan error, 1)}
	cmd.Stderr = g.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		err := <-g.done
		g.done <- err
	})
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
	case g.base = <-listening:
	case err := <-g.done:
		g.done <- err
		t.Fatalf("wamux serve exited before listening: %v\n%s", err, g.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("wamux serve did not print its address\n%s", g.stderr.String())
	}
	return g
}

func (g *gateway) call(method, path, body string) (int, []byte, error) {
	req, err := http.NewRequest(method, g.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+crashKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	return res.StatusCode, raw, err
}

func (g *gateway) must(t *testing.T, method, path, body string) []byte {
	t.Helper()
	code, raw, err := g.call(method, path, body)
	if err != nil || code/100 != 2 {
		t.Fatalf("%s %s = %d %s %v", method, path, code, raw, err)
	}
	return raw
}

// arrival is one request the event receiver got, in arrival order.
type arrival struct {
	id, msg, status string
	version         int64
	body            string
}

// eventSink is a subscriber that lets one request through per tick of its
// gate, so that deliveries queue up and some are in flight at any time.
type eventSink struct {
	srv      *httptest.Server
	gate     chan struct{}
	stop     chan struct{}
	mu       sync.Mutex
	verifier *webhooksig.Verifier
	got      []arrival
	badSig   int
}

func newEventSink(t *testing.T, every time.Duration) *eventSink {
	s := &eventSink{gate: make(chan struct{}), stop: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	tick := time.NewTicker(every)
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			select {
			case s.gate <- struct{}{}:
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		close(s.stop)
		<-ticked
		s.srv.Close()
	})
	return s
}

func (s *eventSink) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var ev struct {
		Data struct {
			MsgID   string `json:"msg_id"`
			Status  string `json:"status"`
			Version int64  `json:"version"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &ev)
	s.mu.Lock()
	if s.verifier == nil || s.verifier.Verify(r.Header, body) != nil {
		s.badSig++
	}
	s.got = append(s.got, arrival{id: r.Header.Get("webhook-id"), msg: ev.Data.MsgID, status: ev.Data.Status,
		version: ev.Data.Version, body: string(body)})
	s.mu.Unlock()
	select {
	case <-s.gate:
		w.WriteHeader(http.StatusNoContent)
	case <-r.Context().Done():
	case <-s.stop:
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

func (s *eventSink) arrivals() []arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]arrival(nil), s.got...)
}

func distinct(as []arrival) int {
	seen := map[string]bool{}
	for _, a := range as {
		seen[a.id] = true
	}
	return len(seen)
}

// TestEventsKill9LosesNoEvent: a gateway delivers the status events of
// 200 messages to a slow subscriber and is killed with SIGKILL while
// deliveries are in flight, then started again on the same data. The
// subscriber ends with, for every message, an event of the message's final
// stored status; each message's events arrive first in version order, and
// any repeat carries the same webhook-id and body.
func TestEventsKill9LosesNoEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the gateway twice")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "wamux")
	build := exec.Command("go", "build", "-o", bin, "./cmd/wamux")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	addr, dataDir := bench.FreePort(), filepath.Join(dir, "data")

	s, err := sim.New(sim.Config{
		Seed: 11,
		Webhooks: sim.Webhooks{URL: "http://" + addr + "/webhook", AppSecret: crashAppSecret, ReadProbability: 1,
			Delay:     sim.Range{Min: 5 * time.Millisecond, Max: 30 * time.Millisecond},
			RetryBase: 50 * time.Millisecond, RetryMax: 300 * time.Millisecond, MaxAttempts: 200},
	})
	if err != nil {
		t.Fatal(err)
	}
	simURL, err := s.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.AddNumber(sim.Number{PhoneNumberID: "888001", AccessToken: "tok-888001",
		Limits: sim.Limits{Rate: 1000, PairInterval: time.Millisecond, PairBurst: 1000}}); err != nil {
		t.Fatal(err)
	}
	sink := newEventSink(t, 3*time.Millisecond)

	g := startGateway(t, bin, addr, dataDir)
	g.must(t, "POST", "/v1/accounts", fmt.Sprintf(
		`{"id":"acc","phone_number_id":"888001","access_token":"tok-888001","base_url":%q,"rate_per_sec":500,"burst":200}`, simURL))
	var sub struct{ ID, Secret string }
	if err := json.Unmarshal(g.must(t, "POST", "/v1/subscriptions",
		`{"url":"`+sink.srv.URL+`/events","events":["message.status"]}`), &sub); err != nil {
		t.Fatal(err)
	}
	v, err := webhooksig.NewVerifier(sub.Secret)
	if err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	sink.verifier = v
	sink.mu.Unlock()

	const n = 200
	var ids, items []string
	for i := 1; i <= n; i++ {
		items = append(items, fmt.Sprintf(`{"biz_type":"evcrash","account_id":"acc","client_seq":%d,"to":"1555800%04d","type":"text","text":{"body":"m%d"}}`, i, i, i))
		ids = append(ids, wamux.DeriveMsgID("evcrash", "acc", int64(i)))
	}
	for i := 0; i < n; i += 100 {
		g.must(t, "POST", "/v1/messages:batch", `{"messages":[`+strings.Join(items[i:i+100], ",")+`]}`)
	}

	// Kill once every message is with the provider (no send is left
	// unknown) and the subscriber has some of the events.
	testwait.For(t, "messages accepted and events arriving", 30*time.Second, func() bool {
		return s.Stats().Totals.Accepted >= n && distinct(sink.arrivals()) >= 150
	})
	if err := g.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-g.done
	g.done <- nil
	atKill := sink.arrivals()

	g2 := startGateway(t, bin, addr, dataDir)
	final := map[string]string{}
	var total int
	testwait.ForNil(t, 40*time.Second, func() error {
		have := map[string]map[string]bool{}
		as := sink.arrivals()
		for _, a := range as {
			if have[a.msg] == nil {
				have[a.msg] = map[string]bool{}
			}
			have[a.msg][a.status] = true
		}
		for _, id := range ids {
			if st, ok := final[id]; ok && have[id][st] {
				continue
			}
			code, raw, err := g2.call("GET", "/v1/messages/"+id, "")
			if err != nil || code != http.StatusOK {
				return fmt.Errorf("GET %s = %d %s %v", id, code, raw, err)
			}
			var m struct{ Status string }
			_ = json.Unmarshal(raw, &m)
			if m.Status != "read" && m.Status != "failed" {
				return fmt.Errorf("message %s is %s, not final yet", id, m.Status)
			}
			final[id] = m.Status
			if !have[id][m.Status] {
				return fmt.Errorf("message %s is %s; the subscriber has no such event (%d requests, %d at the kill)\n%s",
					id, m.Status, len(as), len(atKill), g2.stderr.String())
			}
		}
		total = len(as)
		return nil
	})

	as := sink.arrivals()[:total]
	first := map[string]arrival{}
	version := map[string]int64{}
	dups := 0
	for _, a := range as {
		if a.id == "" || a.msg == "" || a.version == 0 {
			t.Fatalf("event without webhook-id, msg_id or version: %s", a.body)
		}
		if f, ok := first[a.id]; ok {
			dups++
			if f.body != a.body {
				t.Fatalf("%s came again with another body:\n%s\n%s", a.id, f.body, a.body)
			}
			continue
		}
		first[a.id] = a
		if a.version <= version[a.msg] {
			t.Fatalf("message %s: version %d first delivered after version %d", a.msg, a.version, version[a.msg])
		}
		version[a.msg] = a.version
	}
	if d := distinct(atKill); d >= len(first) {
		t.Fatalf("all %d events had arrived at the kill; the restart delivered nothing", d)
	}
	sink.mu.Lock()
	bad := sink.badSig
	sink.mu.Unlock()
	if bad != 0 {
		t.Fatalf("%d deliveries did not verify under the subscription's secret", bad)
	}
	t.Logf("%d events to %d messages; %d had arrived at the kill (%d requests), %d requests in all, %d repeats",
		len(first), n, distinct(atKill), len(atKill), len(as), dups)
}
