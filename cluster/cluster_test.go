package cluster_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wamux/wamux/sim"
)

var full = flag.Bool("cluster.full", false, "also run TestClusterFull: three nodes, 24 accounts, a kill -9 and a restart (make test-cluster)")

// plan is one run of the fleet.
type plan struct {
	nodes, accounts, perAccount, recipients int
	// rate is each account's rate_per_sec, and the simulator's limit
	// per number counted over every one-second window.
	rate int
	// killAt is the share of messages acknowledged when the last node is
	// killed with SIGKILL.
	killAt float64
	// restart stops the first node with SIGTERM and starts it again
	// after the kill's takeover.
	restart bool
	// takeover bounds the time from the kill until every partition the
	// killed node held is held by another node.
	takeover time.Duration
	deadline time.Duration
}

// TestClusterShort runs two nodes over five accounts and kills one
// mid-run: every acknowledged message reaches the provider once, in
// order per recipient, within each account's limit, with every receipt
// merged, and the killed node's partitions move within 10 s.
func TestClusterShort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a fleet")
	}
	run(t, plan{nodes: 2, accounts: 5, perAccount: 40, recipients: 3, rate: 8, killAt: 0.4,
		takeover: 10 * time.Second, deadline: 3 * time.Minute})
}

// TestClusterFull is TestClusterShort on three nodes and 24 accounts,
// with a restart of another node after the kill.
func TestClusterFull(t *testing.T) {
	if !*full {
		t.Skip("run with -cluster.full (make test-cluster)")
	}
	run(t, plan{nodes: 3, accounts: 24, perAccount: 100, recipients: 4, rate: 10, killAt: 0.3, restart: true,
		takeover: 10 * time.Second, deadline: 6 * time.Minute})
}

// msg is one message of the run.
type msg struct {
	id, account, to, phone string
	seq                    int
	item                   string
}

func run(t *testing.T, p plan) {
	ctx, cancel := context.WithTimeout(context.Background(), p.deadline)
	defer cancel()
	f := newFleet(t, p.nodes)
	proxy := f.webhookProxy()
	simulator, err := sim.New(sim.Config{Seed: 1,
		Limits: sim.Limits{Rate: float64(p.rate), StrictSecond: true, PairInterval: time.Millisecond, PairBurst: 1000},
		Webhooks: sim.Webhooks{URL: proxy.URL + "/webhook", AppSecret: appSecret, ReadProbability: 1,
			Delay: sim.Range{Min: 5 * time.Millisecond, Max: 50 * time.Millisecond}, BatchSize: 10,
			RetryBase: 100 * time.Millisecond, RetryMax: time.Second},
		Faults: sim.Faults{WebhookDuplicate: 0.3, WebhookReorder: 0.2},
	})
	if err != nil {
		t.Fatal(err)
	}
	simURL, err := simulator.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer simulator.Close()
	for i := range p.nodes {
		f.start(ctx, i)
	}
	msgs := setup(ctx, t, f, simulator, simURL, p)

	var acked atomic.Int64
	ackedIDs := sync.Map{}
	produced := make(chan struct{})
	var wg sync.WaitGroup
	for a := range p.accounts {
		var mine []*msg
		for i := range msgs {
			if msgs[i].account == accountID(a) {
				mine = append(mine, &msgs[i])
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := produce(ctx, f, mine, uint64(a), p.rate, func(id string) {
				if _, dup := ackedIDs.LoadOrStore(id, true); !dup {
					acked.Add(1)
				}
			}); err != nil {
				t.Errorf("producer of %s: %v", accountID(a), err)
				cancel()
			}
		}()
	}
	go func() { wg.Wait(); close(produced) }()

	// The kill, when killAt of the messages are acknowledged.
	total := int64(len(msgs))
	for acked.Load() < int64(p.killAt*float64(total)) {
		select {
		case <-produced:
		case <-ctx.Done():
			t.Fatalf("before the kill: %v", ctx.Err())
		case <-time.After(20 * time.Millisecond):
			continue
		}
		break
	}
	victim := p.nodes - 1
	before, err := f.holders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	f.kill(victim)
	t.Logf("killed %s at %d/%d acknowledged; it held %d partitions", f.nodes[victim].name, acked.Load(), total, count(before, f.nodes[victim].name))
	moved := waitTakeover(ctx, t, f, f.nodes[victim].name, killedAt, p.takeover)
	t.Logf("its partitions were taken over after %s", moved.Round(time.Millisecond))
	if p.restart {
		f.stop(0)
		f.start(ctx, 0)
		t.Logf("restarted %s", f.nodes[0].name)
	}
	select {
	case <-produced:
	case <-ctx.Done():
		t.Fatalf("producers: %v", ctx.Err())
	}
	if t.Failed() {
		return
	}
	t.Logf("all %d messages acknowledged", acked.Load())
	byID := map[string]*msg{}
	for i := range msgs {
		byID[msgs[i].id] = &msgs[i]
	}
	settle(ctx, t, f, simulator, msgs)
	check(t, simulator, msgs, byID, p)
	for _, nd := range f.nodes {
		if gw := f.gateway(nd); gw != nil {
			f.checkNoPanic(nd.name, gw)
		}
	}
}

func accountID(a int) string { return fmt.Sprintf("acc%02d", a+1) }

// setup creates the accounts (each a number at the simulator) through
// the first node and makes retries and compensation quick.
func setup(ctx context.Context, t *testing.T, f *fleet, simulator *sim.Server, simURL string, p plan) []msg {
	t.Helper()
	gw := f.next()
	must := func(method, path, body string) {
		code, raw, err := gw.Call(ctx, apiKey, method, path, body)
		if err != nil || code/100 != 2 {
			t.Fatalf("%s %s = %d %s: %v", method, path, code, raw, err)
		}
	}
	must("PATCH", "/v1/config", `{"quiet_period":"2s","pair_interval":"1ms","pair_burst":1000,"max_attempts":50,`+
		`"backoff_base":"50ms","backoff_cap":"500ms","cooldown_min":"200ms","cooldown_max":"1s"}`)
	var msgs []msg
	for a := range p.accounts {
		phone := fmt.Sprintf("55500%03d", a+1)
		if err := simulator.AddNumber(sim.Number{PhoneNumberID: phone, AccessToken: "tok-" + phone}); err != nil {
			t.Fatal(err)
		}
		must("POST", "/v1/accounts", fmt.Sprintf(`{"id":%q,"phone_number_id":%q,"access_token":"tok-%s","base_url":%q,"rate_per_sec":%d,"burst":1}`,
			accountID(a), phone, phone, simURL, p.rate))
		for s := 1; s <= p.perAccount; s++ {
			m := msg{account: accountID(a), phone: phone, seq: s, to: fmt.Sprintf("4477%03d%04d", a+1, s%p.recipients)}
			m.item = fmt.Sprintf(`{"biz_type":"cluster","account_id":%q,"client_seq":%d,"to":%q,"type":"text","text":{"body":"%s-%d"}}`,
				m.account, m.seq, m.to, m.account, m.seq)
			msgs = append(msgs, m)
		}
	}
	return msgs
}

// produce submits one account's messages in batches of shuffled
// client_seq to the nodes in turn, about rate a second, sometimes twice,
// and again to another node whenever a node does not answer.
func produce(ctx context.Context, f *fleet, mine []*msg, seed uint64, rate int, ack func(string)) error {
	rng := mrand.New(mrand.NewPCG(seed, 7))
	// Shuffled within blocks of 8: every gap closes within a block.
	for b := 0; b < len(mine); b += 8 {
		blk := mine[b:min(b+8, len(mine))]
		rng.Shuffle(len(blk), func(i, j int) { blk[i], blk[j] = blk[j], blk[i] })
	}
	tick := time.NewTicker(time.Second / time.Duration(max(1, rate/3)))
	defer tick.Stop()
	for len(mine) > 0 {
		n := min(len(mine), 1+rng.IntN(5))
		batch := mine[:n]
		mine = mine[n:]
		times := 1
		if rng.Float64() < 0.15 {
			times = 2
		}
		for range times {
			if err := submit(ctx, f, batch, ack); err != nil {
				return err
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

type result struct {
	MsgID string `json:"msg_id"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func submit(ctx context.Context, f *fleet, batch []*msg, ack func(string)) error {
	items := make([]string, len(batch))
	for i, m := range batch {
		items[i] = m.item
	}
	body := `{"messages":[` + strings.Join(items, ",") + `]}`
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		gw := f.next()
		if gw == nil {
			select { // every node down: a client waits for one
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		rep, err := gw.Do(ctx, apiKey, "POST", "/v1/messages:batch", body)
		if err != nil || rep.Code/100 == 5 || rep.Code == http.StatusTooManyRequests {
			continue // that node is down or busy: the same batch to the next one
		}
		if rep.Code != http.StatusOK {
			return fmt.Errorf("batch refused: %d %s", rep.Code, rep.Body)
		}
		var out struct {
			Results []result `json:"results"`
		}
		if err := json.Unmarshal(rep.Body, &out); err != nil || len(out.Results) != len(batch) {
			return fmt.Errorf("batch answer %s: %v", rep.Body, err)
		}
		again := false
		for i, r := range out.Results {
			if r.Error != nil {
				again = true
				continue
			}
			batch[i].id = r.MsgID
			ack(r.MsgID)
		}
		if !again {
			return nil
		}
	}
}

// waitTakeover waits until no partition is held by the killed node and
// returns how long after the kill that was; longer than bound fails.
func waitTakeover(ctx context.Context, t *testing.T, f *fleet, killed string, at time.Time, bound time.Duration) time.Duration {
	t.Helper()
	for {
		h, err := f.holders(ctx)
		if err == nil && count(h, killed) == 0 {
			d := time.Since(at)
			if d > bound {
				t.Errorf("ownership: the killed node's partitions moved after %s, over %s", d.Round(time.Millisecond), bound)
			}
			return d
		}
		select {
		case <-ctx.Done():
			t.Fatalf("ownership: the killed node's partitions never moved (%v): %v", h, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func count(holders map[int]string, node string) int {
	n := 0
	for _, h := range holders {
		if h == node {
			n++
		}
	}
	return n
}

// settle waits until the simulator accepted every message and every
// message's merged status is read.
func settle(ctx context.Context, t *testing.T, f *fleet, simulator *sim.Server, msgs []msg) {
	t.Helper()
	began := time.Now()
	for {
		st := simulator.Stats()
		if st.Totals.Accepted >= int64(len(msgs)) && st.Webhooks.Pending == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("settle: the provider accepted %d of %d (%d duplicates), %d webhooks pending: %v",
				st.Totals.Accepted, len(msgs), st.Totals.Duplicates, st.Webhooks.Pending, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Logf("provider accepted everything %s after the producers ended", time.Since(began).Round(time.Millisecond))
	for i := 0; i < len(msgs); {
		status, err := messageStatus(ctx, f, msgs[i].id)
		if err == nil && status == "read" {
			i++
			continue
		}
		select {
		case <-ctx.Done():
			t.Fatalf("settle: %s (%s seq %d) is %q (%v)", msgs[i].id, msgs[i].account, msgs[i].seq, status, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Logf("every status merged %s after the producers ended", time.Since(began).Round(time.Millisecond))
}

func messageStatus(ctx context.Context, f *fleet, id string) (string, error) {
	gw := f.next()
	if gw == nil {
		return "", fmt.Errorf("no node")
	}
	code, raw, err := gw.Call(ctx, apiKey, "GET", "/v1/messages/"+id, "")
	if err != nil || code != http.StatusOK {
		return "", fmt.Errorf("%d %s %v", code, raw, err)
	}
	var v struct {
		Status string `json:"status"`
	}
	err = json.Unmarshal(raw, &v)
	return v.Status, err
}

// check holds the provider's record against the messages: each accepted
// once, in client_seq order per recipient, no number over its limit.
func check(t *testing.T, simulator *sim.Server, msgs []msg, byID map[string]*msg, p plan) {
	t.Helper()
	st := simulator.Stats()
	if st.Totals.Duplicates != 0 {
		t.Errorf("once: the provider accepted %d messages more than once", st.Totals.Duplicates)
	}
	if st.Totals.OverLimit != 0 {
		var over []string
		for phone, n := range st.Numbers {
			if n.OverLimit != 0 {
				over = append(over, fmt.Sprintf("%s×%d", phone, n.OverLimit))
			}
		}
		slices.Sort(over)
		t.Errorf("rate: %d sends over a number's limit of %d in a one-second window (peak %d/s): %v", st.Totals.OverLimit, p.rate, st.Totals.PeakAcceptedPerSec, over)
	}
	seen := map[string]int{}
	last := map[string]int{} // phone/to → last seq accepted
	for _, pm := range simulator.Messages("", "") {
		seen[pm.CallbackData]++
		m, ok := byID[pm.CallbackData]
		if !ok {
			t.Errorf("once: the provider accepted %q, which no one submitted", pm.CallbackData)
			continue
		}
		k := pm.PhoneNumberID + "/" + pm.To
		if m.seq < last[k] {
			t.Errorf("order: %s seq %d to %s accepted after seq %d", m.account, m.seq, m.to, last[k])
		}
		last[k] = max(last[k], m.seq)
	}
	var missing []string
	for _, m := range msgs {
		if seen[m.id] != 1 {
			missing = append(missing, fmt.Sprintf("%s×%d", m.id, seen[m.id]))
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		t.Errorf("once: %d messages not accepted exactly once: %v", len(missing), missing[:min(20, len(missing))])
	}
	if t.Failed() {
		return
	}
	t.Logf("%d messages over %d accounts accepted once each, in order, peak %d/s per number (limit %d); webhooks %d posts, %d failed posts",
		len(msgs), p.accounts, st.Totals.PeakAcceptedPerSec, p.rate, st.Webhooks.Posts, st.Webhooks.PostFailures)
}
