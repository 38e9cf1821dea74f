package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/bench"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
)

// shutdownRig is a simulator with a few numbers whose webhooks go to a
// gateway child on a fixed address, so a restarted child gets them too.
type shutdownRig struct {
	dir, addr, secret string
	sim               *sim.Server
	simURL            string
	accounts          []string
}

func newShutdownRig(t *testing.T, accounts int, faults sim.Faults) *shutdownRig {
	t.Helper()
	r := &shutdownRig{dir: t.TempDir(), addr: bench.FreePort(), secret: "app-secret-shutdown-0123456789"}
	s, err := sim.New(sim.Config{
		Seed:   11,
		Faults: faults,
		Webhooks: sim.Webhooks{URL: "http://" + r.addr + "/webhook", AppSecret: r.secret, BatchSize: 10,
			Delay:     sim.Range{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond},
			RetryBase: 100 * time.Millisecond, RetryMax: 500 * time.Millisecond, MaxAttempts: 1000},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.simURL, err = s.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	r.sim = s
	for i := range accounts {
		phone := fmt.Sprintf("88800%d", i)
		if err := s.AddNumber(sim.Number{PhoneNumberID: phone, AccessToken: "tok-" + phone,
			Limits: sim.Limits{Rate: 1000, PairInterval: time.Millisecond, PairBurst: 1000}}); err != nil {
			t.Fatal(err)
		}
		r.accounts = append(r.accounts, "acc"+phone)
	}
	return r
}

func (r *shutdownRig) phone(i int) string { return fmt.Sprintf("88800%d", i) }

func (r *shutdownRig) start(t *testing.T, flags ...string) *child {
	t.Helper()
	return startServeAt(t, r.dir, r.addr, r.secret, flags...)
}

// setFaults changes every number's faults.
func (r *shutdownRig) setFaults(t *testing.T, f sim.Faults) {
	t.Helper()
	for i := range r.accounts {
		if err := r.sim.SetFaults(r.phone(i), f); err != nil {
			t.Fatal(err)
		}
	}
}

// sent counts the provider's accepted messages by msg_id (their
// biz_opaque_callback_data).
func (r *shutdownRig) sent() map[string]int {
	n := map[string]int{}
	for i := range r.accounts {
		for _, m := range r.sim.Messages(r.phone(i), "") {
			n[m.CallbackData]++
		}
	}
	return n
}

// waitSentOnce waits until every message in ids has reached the provider,
// then checks the simulator's ground truth: nothing reached it twice.
func (r *shutdownRig) waitSentOnce(t *testing.T, c *child, ids map[string]string) {
	t.Helper()
	missing := func() string {
		got := r.sent()
		for id := range ids {
			if got[id] == 0 {
				return id
			}
		}
		return ""
	}
	testwait.ForNil(t, 120*time.Second, func() error {
		id := missing()
		if id == "" {
			return nil
		}
		_, body, _ := c.request("GET", "/v1/messages/"+id, childKey, "")
		return fmt.Errorf("message %s acknowledged but not sent: %s\n%s", id, body, c.stderr.String())
	})
	if st := simStats(t, r.simURL); st.Totals.Duplicates != 0 {
		t.Fatalf("%d messages reached the provider twice", st.Totals.Duplicates)
	}
	for id, n := range r.sent() {
		if n != 1 {
			t.Fatalf("message %s reached the provider %d times", id, n)
		}
	}
}

// setup creates the accounts, at a rate below what the clients offer so
// that messages are still queued when the gateway stops.
func (r *shutdownRig) setup(t *testing.T, c *child, rate int) {
	t.Helper()
	for i, id := range r.accounts {
		code, body, err := c.request("POST", "/v1/accounts", childKey, fmt.Sprintf(
			`{"id":%q,"phone_number_id":%q,"access_token":"tok-%s","base_url":%q,"rate_per_sec":%d,"burst":2}`,
			id, r.phone(i), r.phone(i), r.simURL, rate))
		if err != nil || code != 201 {
			t.Fatalf("create account: %d %s %v", code, body, err)
		}
	}
	if code, body, err := c.request("PATCH", "/v1/config", childKey, `{"quiet_period":"5s","pair_interval":"1ms","pair_burst":1000}`); err != nil || code != 200 {
		t.Fatalf("config: %d %s %v", code, body, err)
	}
}

// acked collects what the gateway answered 2xx, from many clients.
type acked struct {
	mu       sync.Mutex
	messages map[string]string // msg_id → account
	statuses []string          // wamids of acknowledged webhooks
	// dropped are the msg_ids and wamids of calls that got no answer at
	// all: the gateway must not have stored them.
	dropped []string
	nMsg    atomic.Int64
	nHook   atomic.Int64
}

// submitUntilRefused submits messages for one account in client_seq order,
// each after the previous was answered, until the gateway answers anything
// but 2xx or not at all: no later seq is offered after one that may not
// be stored, so an acknowledged message never waits for a gap.
func (a *acked) submitUntilRefused(c *child, account string) {
	for seq := 1; ; seq++ {
		body := fmt.Sprintf(`{"biz_type":"stop","account_id":%q,"client_seq":%d,"to":"1555700%04d","type":"text","text":{"body":"m%d"}}`,
			account, seq, seq%7, seq)
		code, resp, err := c.request("POST", "/v1/messages", childKey, body)
		if err != nil {
			a.drop(wamux.DeriveMsgID("stop", account, int64(seq)))
		}
		if err != nil || code/100 != 2 {
			return
		}
		var m struct {
			MsgID string `json:"msg_id"`
		}
		if json.Unmarshal([]byte(resp), &m) != nil || m.MsgID != wamux.DeriveMsgID("stop", account, int64(seq)) {
			return
		}
		a.mu.Lock()
		a.messages[m.MsgID] = account
		a.mu.Unlock()
		a.nMsg.Add(1)
	}
}

// webhookUntilRefused posts signed notifications of two statuses (sent,
// delivered) of fresh wamids until the gateway does not answer 200.
func (a *acked) webhookUntilRefused(c *child, secret, phone string, w int) {
	ts := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).Unix()
	for i := 0; ; i++ {
		wamid := fmt.Sprintf("wamid.STOP%02d%06d", w, i)
		body := []byte(fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages",`+
			`"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"1555","phone_number_id":%q},"statuses":[`+
			`{"id":%q,"status":"delivered","timestamp":"%d","recipient_id":"16505550000"},`+
			`{"id":%q,"status":"sent","timestamp":"%d","recipient_id":"16505550000"}]}}]}]}`,
			phone, wamid, ts+1, wamid, ts))
		req, err := http.NewRequest("POST", c.base+"/webhook", bytes.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set(cloudapi.SignatureHeader, cloudapi.Sign(body, secret))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			a.drop(wamid)
			return
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return
		}
		a.mu.Lock()
		a.statuses = append(a.statuses, wamid)
		a.mu.Unlock()
		a.nHook.Add(1)
	}
}

func (a *acked) drop(id string) {
	a.mu.Lock()
	a.dropped = append(a.dropped, id)
	a.mu.Unlock()
}

// waitTotals waits until the simulator's totals satisfy ok.
func (r *shutdownRig) waitTotals(t *testing.T, ok func(sim.NumberStats) bool) {
	t.Helper()
	testwait.ForNil(t, 60*time.Second, func() error {
		if st := r.sim.Stats().Totals; !ok(st) {
			return fmt.Errorf("simulator totals %+v", st)
		}
		return nil
	})
}

// simStats reads the simulator's ground truth the way an operator would.
func simStats(t *testing.T, simURL string) sim.Stats {
	t.Helper()
	res, err := http.Get(simURL + "/sim/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var st sim.Stats
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSIGTERMUnderLoadKeepsEveryAcknowledgement: message submits and
// signed status webhooks are in flight (and messages queued behind the
// accounts' rates, others with the provider) when the gateway gets
// SIGTERM. It exits 0 after an orderly stop; started again, every message
// and every status it answered 2xx is there, the messages reach the
// provider exactly once, and the receipt log is empty after the next stop.
func TestSIGTERMUnderLoadKeepsEveryAcknowledgement(t *testing.T) {
	r := newShutdownRig(t, 3, sim.Faults{Latency: sim.Range{Min: 5 * time.Millisecond, Max: 60 * time.Millisecond}})
	c := r.start(t)
	// A rate below what one client per account submits even on a busy
	// machine, so messages queue behind it when the stop comes.
	r.setup(t, c, 8)

	a := &acked{messages: map[string]string{}}
	var wg sync.WaitGroup
	for _, id := range r.accounts {
		wg.Go(func() { a.submitUntilRefused(c, id) })
	}
	for w := range 6 {
		wg.Go(func() { a.webhookUntilRefused(c, r.secret, r.phone(w%len(r.accounts)), w) })
	}
	testwait.ForNil(t, 60*time.Second, func() error {
		msgs, hooks, accepted := a.nMsg.Load(), a.nHook.Load(), r.sim.Stats().Totals.Accepted
		if msgs >= 150 && hooks >= 300 && accepted >= 30 && msgs-accepted >= 30 {
			return nil
		}
		return fmt.Errorf("%d messages, %d webhooks acknowledged, %d accepted by the provider (30 must be left queued)\n%s",
			msgs, hooks, accepted, c.stderr.String())
	})
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := c.wait(t)
	wg.Wait()
	logs := c.stderr.String()
	if code != 0 {
		t.Fatalf("exit code %d after SIGTERM\n%s", code, logs)
	}
	if strings.Contains(logs, "shutdown incomplete") {
		t.Fatalf("the shutdown did not finish:\n%s", logs)
	}
	atStop := r.sim.Stats().Totals.Accepted
	if atStop >= int64(len(a.messages)) {
		t.Fatalf("all %d messages were sent before the stop; the test proves nothing", len(a.messages))
	}

	c2 := r.start(t)
	r.waitSentOnce(t, c2, a.messages)
	// A call the gateway did not answer was refused before it was read:
	// nothing of it is stored (a connection dropped after storing would
	// leave the client not knowing).
	for _, id := range a.dropped {
		if strings.HasPrefix(id, "wamid.") {
			continue // checked in the database below
		}
		if code, body, err := c2.request("GET", "/v1/messages/"+id, childKey, ""); err != nil || code != 404 {
			t.Fatalf("message %s got no answer at the stop but is stored: %d %s %v", id, code, body, err)
		}
	}
	if err := c2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := c2.wait(t); code != 0 {
		t.Fatalf("restarted gateway exited %d\n%s", code, c2.stderr.String())
	}
	checkStatusesStored(t, filepath.Join(r.dir, "data"), r, a.statuses, a.dropped)
	t.Logf("%d messages and %d webhooks acknowledged, %d calls unanswered; %d sent before the stop",
		len(a.messages), len(a.statuses), len(a.dropped), atStop)
}

// checkStatusesStored opens the stopped gateway's database: every
// acknowledged notification's two statuses are stored and merged to
// delivered, none of an unanswered one is, and nothing is left in the
// receipt log.
func checkStatusesStored(t *testing.T, dataDir string, r *shutdownRig, wamids, dropped []string) {
	t.Helper()
	st := openData(t, dataDir)
	defer st.Close()
	ctx := context.Background()
	phoneAccount := map[string]string{}
	for i, id := range r.accounts {
		phoneAccount[r.phone(i)] = id
	}
	accountOf := func(wamid string) string {
		var w, i int
		if _, err := fmt.Sscanf(wamid, "wamid.STOP%02d%06d", &w, &i); err != nil {
			t.Fatal(err)
		}
		return phoneAccount[r.phone(w%len(r.accounts))]
	}
	for _, wamid := range dropped {
		if !strings.HasPrefix(wamid, "wamid.") {
			continue
		}
		if rs, err := st.ListReceipts(ctx, accountOf(wamid), wamid); err != nil || len(rs) != 0 {
			t.Fatalf("%s got no answer at the stop but %d statuses are stored (%v)", wamid, len(rs), err)
		}
	}
	var keys []store.StateKey
	for _, wamid := range wamids {
		account := accountOf(wamid)
		rs, err := st.ListReceipts(ctx, account, wamid)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 2 {
			t.Fatalf("%s was acknowledged with 2 statuses; %d stored after SIGTERM and restart", wamid, len(rs))
		}
		keys = append(keys, store.StateKey{AccountID: account, MessageID: wamid})
	}
	states, err := st.GetStates(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if s, ok := states[k]; !ok || s.Type != wamux.ReceiptDelivered {
			t.Fatalf("%s: merged state %+v (found %v), want delivered", k.MessageID, s, ok)
		}
	}
	left, err := st.ListReceiptLog(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("the receipt log still holds %d receipts after a clean stop", len(left))
	}
}

// TestSIGTERMWithHangingProviderExitsWithinBound: every send hangs at the
// provider (accepted, answer withheld) when the gateway gets SIGTERM. The
// drain is cut short at --shutdown-timeout; the gateway still stops in
// order and exits 0. Started again (the provider answering again), the
// messages abandoned mid-call are resolved by the provider's status
// webhooks, not sent twice, and the rest are sent.
func TestSIGTERMWithHangingProviderExitsWithinBound(t *testing.T) {
	r := newShutdownRig(t, 2, sim.Faults{Latency: sim.Range{Min: 2 * time.Millisecond, Max: 10 * time.Millisecond}})
	c := r.start(t, "--shutdown-timeout", "2s")
	r.setup(t, c, 20)
	ids := map[string]string{}
	for i, account := range r.accounts {
		var items []string
		for seq := 1; seq <= 60; seq++ {
			items = append(items, fmt.Sprintf(`{"biz_type":"hang","account_id":%q,"client_seq":%d,"to":"1555600%04d","type":"text","text":{"body":"m%d"}}`,
				account, seq, (seq+i)%5, seq))
			ids[wamux.DeriveMsgID("hang", account, int64(seq))] = account
		}
		code, body, err := c.request("POST", "/v1/messages:batch", childKey, `{"messages":[`+strings.Join(items, ",")+`]}`)
		if err != nil || code != 200 || strings.Contains(body, `"error"`) {
			t.Fatalf("submit: %d %s %v", code, body, err)
		}
	}
	r.waitTotals(t, func(st sim.NumberStats) bool { return st.Accepted >= 10 })
	r.setFaults(t, sim.Faults{SlowAccept: 1, SlowDelay: time.Hour})
	r.waitTotals(t, func(st sim.NumberStats) bool { return st.Faults["slow_accept"] >= 3 })

	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code := c.wait(t) // a generous deadline: the bound is 2 s
	logs := c.stderr.String()
	if code != 0 {
		t.Fatalf("exit code %d after SIGTERM\n%s", code, logs)
	}
	r.setFaults(t, sim.Faults{Latency: sim.Range{Min: 2 * time.Millisecond, Max: 10 * time.Millisecond}})
	c2 := r.start(t, "--shutdown-timeout", "2s")
	r.waitSentOnce(t, c2, ids)
	if err := c2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := c2.wait(t); code != 0 {
		t.Fatalf("restarted gateway exited %d\n%s", code, c2.stderr.String())
	}
}

// TestSIGTERMWithAStalledClientLetsSendsFinish: a client has sent half a
// request and stalls, so the HTTP drain lasts the whole shutdown bound.
// The sends the gateway has with the provider at SIGTERM still finish and
// are recorded: none is left with an unknown outcome (to be compensated
// after the next start, and resent if no status comes), and the gateway
// does not go on starting new sends while it waits for that client.
func TestSIGTERMWithAStalledClientLetsSendsFinish(t *testing.T) {
	r := newShutdownRig(t, 2, sim.Faults{Latency: sim.Range{Min: 200 * time.Millisecond, Max: 400 * time.Millisecond}})
	c := r.start(t, "--shutdown-timeout", "5s")
	r.setup(t, c, 20)
	for i, account := range r.accounts {
		var items []string
		for seq := 1; seq <= 200; seq++ {
			items = append(items, fmt.Sprintf(`{"biz_type":"stall","account_id":%q,"client_seq":%d,"to":"1555500%04d","type":"text","text":{"body":"m%d"}}`,
				account, seq, (seq+i)%7, seq))
		}
		code, body, err := c.request("POST", "/v1/messages:batch", childKey, `{"messages":[`+strings.Join(items, ",")+`]}`)
		if err != nil || code != 200 || strings.Contains(body, `"error"`) {
			t.Fatalf("submit: %d %s %v", code, body, err)
		}
	}
	r.waitTotals(t, func(st sim.NumberStats) bool { return st.Accepted >= 10 })

	stalled, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	if _, err := io.WriteString(stalled, "POST /webhook HTTP/1.1\r\nHost: wamux\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	// The server accepts connections in order: once a later one is
	// answered, the stalled one is the server's and holds the drain.
	if code, _, err := c.request("GET", "/healthz", "", ""); err != nil || code != 200 {
		t.Fatalf("/healthz = %d, %v", code, err)
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := c.wait(t); code != 0 {
		t.Fatalf("exit code %d after SIGTERM\n%s", code, c.stderr.String())
	}
	if n := r.sim.Stats().Totals.Accepted; n >= 400 {
		t.Fatalf("all %d messages were sent before the process ended; the test proves nothing", n)
	}

	st := openData(t, filepath.Join(r.dir, "data"))
	defer st.Close()
	open, err := st.ListMessages(context.Background(), store.MessageFilter{
		Statuses: []wamux.Status{wamux.StatusSending, wamux.StatusUnknown}, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range open {
		t.Errorf("message %s (seq %d) was left %s: %s", m.ID, m.ClientSeq, m.Status, m.LastError)
	}
}
