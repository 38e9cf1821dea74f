package chaos

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/sim"
)

// Config is one round.
type Config struct {
	// Bin is the wamux binary the gateway runs as.
	Bin string
	// Dir holds the round's data directory.
	Dir string
	// Store is empty for SQLite in Dir, or a PostgreSQL URL: the round
	// runs in a schema of its own there, dropped afterwards.
	Store string
	Seed  uint64
	// Messages is how many messages the producers submit; default 150.
	Messages int
	// Drain bounds the wait for everything to settle after the last
	// kill; default 60 s. A round still unsettled then reports what is
	// not.
	Drain time.Duration
	// Logf receives progress lines; default none.
	Logf func(format string, args ...any)
}

// Result is what a round did and found.
type Result struct {
	Seed uint64
	// Violations are the broken invariants, one line each; empty when the
	// round passed.
	Violations []string
	Accounts   int
	Kills      []string // what each kill was timed on
	Submitted  int      // messages acknowledged by the gateway
	// AtProvider counts messages the simulator accepted (first time);
	// Resends the further acceptances, each counted by the gateway.
	AtProvider, Resends int
	Faults              map[string]int64
	Rejected            map[int]int64
	HooksRefused        int64 // status webhooks the tap refused
	HooksLost           int64 // status webhooks the tap lost for good
	Abuse               abuseStats
	// MaxLatency is the longest a producer's answered request took.
	MaxLatency time.Duration
	Settled    time.Duration
}

func (r Result) String() string {
	return fmt.Sprintf("seed=%d accounts=%d kills=%d %v submitted=%d at_provider=%d resends=%d faults=%v rejected=%v hooks_refused=%d hooks_lost=%d %s max_latency=%s settled=%s violations=%d",
		r.Seed, r.Accounts, len(r.Kills), r.Kills, r.Submitted, r.AtProvider, r.Resends, r.Faults, r.Rejected, r.HooksRefused, r.HooksLost,
		r.Abuse, r.MaxLatency.Round(time.Millisecond), r.Settled.Round(time.Millisecond), len(r.Violations))
}

const (
	apiKey     = "chaos-key-0123456789abcdef"
	appSecret  = "chaos-app-secret-0123456789"
	bizType    = "chaos"
	recipients = 8
	// The gateway's account rate and burst, and the simulator's, which
	// is twice as high: a restart refills the gateway's bucket, and that
	// must still not push the provider over its limit.
	gatewayRate, gatewayBurst = 150, 10
	simRate                   = 2 * gatewayRate
)

// params are the round's draws from its seed.
type params struct {
	accounts  int
	faults    sim.Faults
	hooks     sim.Webhooks
	refuse    float64 // tap: status webhooks refused
	sinkSlow  time.Duration
	sinkFail  float64
	kills     []killPoint
	batchMax  int
	resubmit  float64
	producers int
}

// killPoint is a moment to kill the gateway: when its condition first
// holds.
type killPoint struct {
	what string
	at   float64 // the fraction of messages at the provider, or of events received
}

func draw(seed uint64) params {
	rng := mrand.New(mrand.NewPCG(seed, 1))
	up := func(hi float64) float64 { return rng.Float64() * hi }
	p := params{
		accounts: 1 + rng.IntN(3),
		faults: sim.Faults{
			ServerError: up(0.1), Reset: up(0.05), ResetAfterAccept: up(0.05), ServerErrorAfterAccept: up(0.05),
			Codes:            map[int]float64{130429: up(0.02)},
			Latency:          sim.Range{Min: time.Millisecond, Max: time.Duration(1+rng.IntN(20)) * time.Millisecond},
			WebhookDuplicate: up(0.3), WebhookReorder: up(0.3),
		},
		hooks: sim.Webhooks{AppSecret: appSecret,
			ReadProbability: up(1), FailProbability: up(0.2), SkipDeliveredProbability: up(0.3), FailAfterSentProbability: up(1),
			Delay:     sim.Range{Min: 5 * time.Millisecond, Max: time.Duration(20+rng.IntN(100)) * time.Millisecond},
			BatchSize: 1 + rng.IntN(20), RetryBase: 50 * time.Millisecond, RetryMax: 300 * time.Millisecond,
		},
		refuse:    up(0.2),
		sinkSlow:  time.Duration(rng.IntN(20)) * time.Millisecond,
		sinkFail:  up(0.1),
		batchMax:  1 + rng.IntN(40),
		resubmit:  up(0.2),
		producers: 1 + rng.IntN(3),
	}
	kinds := []string{"submit", "compensation", "events"}
	for range 1 + rng.IntN(3) {
		p.kills = append(p.kills, killPoint{what: kinds[rng.IntN(len(kinds))], at: 0.1 + up(0.8)})
	}
	return p
}

// round is the state of one running round.
type round struct {
	cfg  Config
	p    params
	a    abuse
	sim  *sim.Server
	tap  *tap
	sink *sink
	gcfg GatewayConfig

	mu      sync.Mutex
	gw      *Gateway      // nil while down
	up      chan struct{} // closed while a gateway is up
	msgs    []message
	byID    map[string]*message
	acked   map[string]bool
	simURL  string
	started time.Time

	extra      map[string]*extraMsg // the flood's and slow clients' messages
	extraN     int
	violations []string // seen while the round runs
	stats      abuseStats
	maxLatency time.Duration
}

type message struct {
	id, account, to string
	seq             int64
	item            string
}

func (r *round) logf(format string, args ...any) {
	if r.cfg.Logf != nil {
		r.cfg.Logf(format, args...)
	}
}

func (r *round) base() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gw == nil {
		return ""
	}
	return r.gw.Base
}

// gateway returns the running gateway, waiting for one.
func (r *round) gateway(ctx context.Context) (*Gateway, error) {
	for {
		r.mu.Lock()
		gw, up := r.gw, r.up
		r.mu.Unlock()
		if gw != nil {
			return gw, nil
		}
		select {
		case <-up:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (r *round) start(ctx context.Context) error {
	gw, err := StartGateway(ctx, r.gcfg)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.gw = gw
	close(r.up)
	r.mu.Unlock()
	return nil
}

// kill ends the gateway with SIGKILL and starts it again on the same data.
func (r *round) kill(ctx context.Context, what string) error {
	r.mu.Lock()
	gw := r.gw
	r.gw, r.up = nil, make(chan struct{})
	r.mu.Unlock()
	gw.Kill()
	if s := gw.Stderr(); strings.Contains(s, "panic") {
		return fmt.Errorf("gateway panicked before the kill (%s):\n%s", what, s)
	}
	r.logf("chaos: seed=%d kill -9 (%s) after %s", r.cfg.Seed, what, time.Since(r.started).Round(time.Millisecond))
	return r.start(ctx)
}

func secretKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// Round runs one round. The error is about the round's machinery (a
// process that would not start); broken invariants are in the Result.
func Round(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Messages <= 0 {
		cfg.Messages = 150
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 60 * time.Second
	}
	r := &round{cfg: cfg, p: draw(cfg.Seed), a: drawAbuse(cfg.Seed), up: make(chan struct{}), byID: map[string]*message{},
		acked: map[string]bool{}, extra: map[string]*extraMsg{}, started: time.Now()}
	res := Result{Seed: cfg.Seed, Accounts: r.p.accounts}
	r.logf("chaos: seed=%d %s", cfg.Seed, r.a)
	r.gcfg = GatewayConfig{Bin: cfg.Bin, DataDir: filepath.Join(cfg.Dir, "data"), Env: []string{
		"WAMUX_API_KEYS=" + apiKey + "," + floodKey + ":send," + slowKey + ":send+read", "WAMUX_SECRET_KEY=" + secretKey(), "WAMUX_APP_SECRET=" + appSecret,
		"WAMUX_EVENT_ALLOW_NETWORKS=127.0.0.0/8", "WAMUX_PROVIDER_BASE_URLS=http://127.0.0.1", "WAMUX_LOG_LEVEL=warn",
		"WAMUX_MAX_CONNECTIONS=" + strconv.Itoa(maxConnections),
	}}

	var err error
	if cfg.Store != "" {
		spec, drop, err := freshSchema(ctx, cfg.Store)
		if err != nil {
			return res, err
		}
		defer func() {
			if err := drop(); err != nil {
				r.logf("chaos: %v", err)
			}
		}()
		r.gcfg.Store = spec
	}
	if r.tap, err = startTap(cfg.Seed, r.p.refuse, r.a.drop, r.base); err != nil {
		return res, err
	}
	defer r.tap.Close()
	if r.sink, err = startSink(cfg.Seed, r.p.sinkSlow, r.p.sinkFail); err != nil {
		return res, err
	}
	defer r.sink.Close()
	hooks := r.p.hooks
	hooks.URL = r.tap.URL
	if r.sim, err = sim.New(sim.Config{Seed: cfg.Seed, Faults: r.p.faults, Webhooks: hooks,
		Limits: sim.Limits{Rate: simRate, Burst: simRate, PairInterval: time.Millisecond, PairBurst: 1000}}); err != nil {
		return res, err
	}
	if r.simURL, err = r.sim.Start(ctx, "127.0.0.1:0"); err != nil {
		return res, err
	}
	defer r.sim.Close()

	if err := r.start(ctx); err != nil {
		return res, err
	}
	defer func() {
		r.mu.Lock()
		gw := r.gw
		r.mu.Unlock()
		if gw != nil {
			gw.Kill()
		}
	}()
	if err := r.setup(ctx); err != nil {
		return res, err
	}

	// Producers and the killer run together; the killer's points that
	// never come (no ambiguous send, say) end with the producers.
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	produced := make(chan struct{})
	errs := make(chan error, r.p.producers+1)
	for i := range r.p.producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.produce(pctx, i); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	var abusers sync.WaitGroup
	if r.a.flood != nil {
		abusers.Go(func() { r.flood(pctx, produced) })
	}
	if r.a.slow != nil {
		abusers.Go(func() { r.slowClients(pctx, produced) })
	}
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		k, err := r.killer(pctx, produced)
		res.Kills = k
		if err != nil {
			errs <- err
			cancel()
		}
	}()
	wg.Wait()
	close(produced)
	abusers.Wait()
	<-killed
	select {
	case err := <-errs:
		return res, err
	default:
	}
	if r.a.flood != nil {
		if err := r.configure(ctx, openSettings); err != nil {
			return res, err
		}
	}
	res.Submitted = len(r.acked)
	r.logf("chaos: seed=%d %d messages acknowledged; draining", cfg.Seed, res.Submitted)

	settled := time.Now()
	st, err := r.settle(ctx)
	if err != nil {
		return res, err
	}
	res.Settled = time.Since(settled)
	r.check(ctx, st, &res)
	return res, nil
}

func (r *round) setup(ctx context.Context) error {
	gw, err := r.gateway(ctx)
	if err != nil {
		return err
	}
	must := func(method, path, body string) ([]byte, error) {
		code, raw, err := gw.Call(ctx, apiKey, method, path, body)
		if err != nil || code/100 != 2 {
			return nil, fmt.Errorf("%s %s = %d %s: %v", method, path, code, raw, err)
		}
		return raw, nil
	}
	for a := range r.p.accounts {
		phone := fmt.Sprintf("77700%d", a+1)
		if err := r.sim.AddNumber(sim.Number{PhoneNumberID: phone, AccessToken: "tok-" + phone}); err != nil {
			return err
		}
		if _, err := must("POST", "/v1/accounts", fmt.Sprintf(
			`{"id":"acc%d","phone_number_id":%q,"access_token":"tok-%s","base_url":%q,"rate_per_sec":%d,"burst":%d}`,
			a+1, phone, phone, r.simURL, gatewayRate, gatewayBurst)); err != nil {
			return err
		}
	}
	if f := r.a.flood; f != nil && f.own {
		if err := r.sim.AddNumber(sim.Number{PhoneNumberID: "777009", AccessToken: "tok-777009"}); err != nil {
			return err
		}
		if _, err := must("POST", "/v1/accounts", fmt.Sprintf(
			`{"id":"accF","phone_number_id":"777009","access_token":"tok-777009","base_url":%q,"rate_per_sec":%d,"burst":5}`,
			r.simURL, f.rate)); err != nil {
			return err
		}
	}
	if _, err := must("PATCH", "/v1/config", `{"quiet_period":"1s","pair_interval":"1ms","pair_burst":1000,`+
		`"max_attempts":30,"backoff_base":"50ms","backoff_cap":"500ms","cooldown_min":"200ms","cooldown_max":"1s"}`); err != nil {
		return err
	}
	raw, err := must("POST", "/v1/subscriptions", `{"url":"`+r.sink.URL+`","events":["message.status"]}`)
	if err != nil {
		return err
	}
	var sub struct{ Secret string }
	if err := json.Unmarshal(raw, &sub); err != nil {
		return err
	}
	if err := r.sink.setSecret(sub.Secret); err != nil {
		return err
	}
	if r.a.flood != nil { // last: the producers' key is limited from here on
		if _, err := must("PATCH", "/v1/config", floodSettings); err != nil {
			return err
		}
	}
	seqs := make([]int64, r.p.accounts)
	for i := range r.cfg.Messages {
		a := i % r.p.accounts
		seqs[a]++
		acc := fmt.Sprintf("acc%d", a+1)
		to := fmt.Sprintf("1555%d00%04d", a+1, i%recipients)
		m := message{id: wamux.DeriveMsgID(bizType, acc, seqs[a]), account: acc, to: to, seq: seqs[a]}
		m.item = fmt.Sprintf(`{"biz_type":%q,"account_id":%q,"client_seq":%d,"to":%q,"type":"text","text":{"body":"m%d"}}`,
			bizType, acc, m.seq, to, i)
		r.msgs = append(r.msgs, m)
	}
	for i := range r.msgs {
		r.byID[r.msgs[i].id] = &r.msgs[i]
	}
	return nil
}

// configure patches the runtime settings on the running gateway.
func (r *round) configure(ctx context.Context, patch string) error {
	for {
		gw, err := r.gateway(ctx)
		if err != nil {
			return err
		}
		rep, err := gw.Do(ctx, apiKey, "PATCH", "/v1/config", patch)
		switch {
		case err == nil && rep.Code == http.StatusOK:
			return nil
		case err == nil && rep.Code == http.StatusTooManyRequests:
			wait(ctx, r.whole429("the runner's settings change", rep))
			continue
		case err == nil && rep.Code/100 == 4:
			return fmt.Errorf("PATCH /v1/config %s = %d %s", patch, rep.Code, rep.Body)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		pause(ctx)
	}
}

// produce submits producer i's share of the messages in batches (chunks
// of ten, dealt round-robin, so client_seqs arrive out of order), again
// after any failure, and sometimes a batch again after its success.
func (r *round) produce(ctx context.Context, i int) error {
	rng := mrand.New(mrand.NewPCG(r.cfg.Seed, uint64(100+i)))
	var mine []*message
	for j := range r.msgs {
		if (j/10)%r.p.producers == i {
			mine = append(mine, &r.msgs[j])
		}
	}
	for len(mine) > 0 {
		n := min(len(mine), 1+rng.IntN(r.p.batchMax))
		batch := mine[:n]
		mine = mine[n:]
		times := 1
		if rng.Float64() < r.p.resubmit {
			times = 2
		}
		for range times {
			if err := r.submit(ctx, batch); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *round) submit(ctx context.Context, batch []*message) error {
	items := make([]string, len(batch))
	for i, m := range batch {
		items[i] = m.item
	}
	body := `{"messages":[` + strings.Join(items, ",") + `]}`
	for {
		gw, err := r.gateway(ctx)
		if err != nil {
			return err
		}
		begin := time.Now()
		rep, err := gw.Do(ctx, apiKey, "POST", "/v1/messages:batch", body)
		if err != nil || rep.Code/100 == 5 {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue // the gateway is down or restarting: the same batch again
		}
		r.answered(time.Since(begin))
		switch {
		case rep.Code == http.StatusTooManyRequests:
			wait(ctx, r.whole429("a producer", rep))
			continue
		case rep.Code != http.StatusOK:
			return fmt.Errorf("batch refused: %d %s", rep.Code, rep.Body)
		}
		var out struct {
			Results []batchResult `json:"results"`
		}
		if err := json.Unmarshal(rep.Body, &out); err != nil || len(out.Results) != len(batch) {
			return fmt.Errorf("batch answer %s: %v", rep.Body, err)
		}
		ok, full := true, false
		for i, res := range out.Results {
			if res.Error != nil {
				ok = false
				full = full || res.Error.Code == wamux.EQueueFull
				continue
			}
			if res.MsgID != batch[i].id {
				return fmt.Errorf("item %d: msg_id %s, want %s", i, res.MsgID, batch[i].id)
			}
			r.mu.Lock()
			r.acked[res.MsgID] = true
			r.mu.Unlock()
		}
		if ok {
			return nil
		}
		if full {
			wait(ctx, r.retryAfter("a producer", rep.Header, out.Results))
		}
	}
}

// answered records how long a producer's answered request took.
func (r *round) answered(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maxLatency = max(r.maxLatency, d)
}

// wait honours a Retry-After up to producerWaitMax.
func wait(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(min(d, producerWaitMax)):
	case <-ctx.Done():
	}
}

// killer kills the gateway at each of the round's kill points, in order.
func (r *round) killer(ctx context.Context, produced <-chan struct{}) ([]string, error) {
	var done []string
	n := int64(len(r.msgs))
	for _, k := range r.p.kills {
		var cond func() bool
		switch k.what {
		case "submit":
			// while producers are still submitting (group commit)
			target := int64(k.at * float64(n))
			cond = func() bool { st := r.sim.Stats().Totals; return st.Accepted-st.Duplicates >= target }
		case "compensation":
			// just after a send whose outcome the gateway cannot know
			base := ambiguous(r.sim.Stats())
			cond = func() bool { return ambiguous(r.sim.Stats()) > base }
		case "events":
			target := int64(k.at * float64(n))
			cond = func() bool {
				r.sink.mu.Lock()
				defer r.sink.mu.Unlock()
				return int64(len(r.sink.seen)) >= target
			}
		}
		fired, err := r.await(ctx, produced, cond)
		if err != nil {
			return done, err
		}
		what := fmt.Sprintf("%s@%.2f", k.what, k.at)
		if !fired {
			// Its moment never came: kill while the round settles.
			what += "-missed"
		}
		if ctx.Err() != nil {
			return done, nil
		}
		if err := r.kill(ctx, what); err != nil {
			return done, err
		}
		done = append(done, what)
	}
	return done, nil
}

// await polls cond until it holds (true), or until the producers are done
// and the simulator has no status webhook left to send (false): then
// nothing more that a kill point waits for is coming.
func (r *round) await(ctx context.Context, produced <-chan struct{}, cond func() bool) (bool, error) {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-produced:
			if r.sim.Stats().Webhooks.Pending == 0 {
				return cond(), nil
			}
		default:
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-tick.C:
		}
	}
}

func ambiguous(st sim.Stats) int64 {
	return st.Totals.Faults["reset_after_accept"] + st.Totals.Faults["server_error_after_accept"]
}

// state is the gateway's view of one message.
type state struct {
	Status   string `json:"status"`
	Wamid    string `json:"wamid"`
	Attempts int    `json:"attempts"`
}

// settle waits until the simulator has no status webhook left to send,
// and every acknowledged message has the status its acknowledged receipts
// call for, with its event at the subscriber; or until Drain has passed.
func (r *round) settle(ctx context.Context) (map[string]state, error) {
	deadline := time.Now().Add(r.cfg.Drain)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	states := map[string]state{}
	lastLog := time.Now()
	for {
		gw, err := r.gateway(ctx)
		if err != nil {
			return nil, err
		}
		pending := r.sim.Stats().Webhooks.Pending
		settled := pending == 0
		atProvider := r.atProvider()
		for id := range r.acked {
			if s, ok := states[id]; ok && settled && s.Status == r.want(id, s, atProvider) && r.sink.has(id, s.Status) {
				continue
			}
			code, raw, err := gw.Call(ctx, apiKey, "GET", "/v1/messages/"+id, "")
			if err != nil || code != 200 {
				settled = false
				delete(states, id)
				continue
			}
			var s state
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, err
			}
			states[id] = s
			if s.Status != r.want(id, s, atProvider) || !r.sink.has(id, s.Status) {
				settled = false
			}
		}
		if settled || time.Now().After(deadline) {
			return states, nil
		}
		if time.Since(lastLog) > time.Second {
			lastLog = time.Now()
			var waiting []string
			for id, s := range states {
				if want := r.want(id, s, atProvider); s.Status != want || !r.sink.has(id, s.Status) {
					waiting = append(waiting, fmt.Sprintf("%s:%s/%s/%v", id[:min(12, len(id))], s.Status, want, r.sink.has(id, s.Status)))
				}
			}
			r.logf("chaos: settling: webhooks pending %d, waiting %d %v", pending, len(waiting), waiting[:min(5, len(waiting))])
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// want is the final status message id must reach, given the wamid the
// gateway holds for it (s): the strongest status the gateway acknowledged
// for that wamid (any, without one); accepted when the provider accepted
// it but no status of it reached the gateway (lost for good); failed when
// the provider never accepted it (the gateway gave up on it).
func (r *round) want(id string, s state, atProvider map[string]bool) string {
	if st := r.tap.expected(id, s.Wamid); st != "" {
		return st
	}
	if s.Wamid != "" || atProvider[id] {
		return "accepted"
	}
	return "failed"
}

// atProvider is the set of msg_ids the simulator accepted, and of the
// wamids it gave them.
func (r *round) atProvider() map[string]bool {
	out := map[string]bool{}
	for _, pm := range r.sim.Messages("", "") {
		out[pm.CallbackData] = true
		out[pm.CallbackData+" "+pm.WAMID] = true
	}
	return out
}

// check compares the end state against every invariant.
func (r *round) check(ctx context.Context, states map[string]state, res *Result) {
	bad := func(format string, args ...any) {
		if len(res.Violations) < 50 {
			res.Violations = append(res.Violations, fmt.Sprintf(format, args...))
		}
	}
	st := r.sim.Stats()
	res.Faults, res.Rejected = st.Totals.Faults, st.Totals.Rejected
	r.tap.mu.Lock()
	res.HooksRefused, res.HooksLost = r.tap.refused, r.tap.dropped
	r.tap.mu.Unlock()
	r.mu.Lock()
	res.Violations = append(res.Violations, r.violations...)
	res.Abuse, res.MaxLatency = r.stats, r.maxLatency
	r.mu.Unlock()
	atProvider := r.atProvider()

	// 1 and 5: every acknowledged message is stored, with the status its
	// acknowledged receipts call for.
	kept := make([]message, 0, len(r.msgs))
	for _, m := range r.msgs {
		if !r.acked[m.id] {
			bad("acknowledged: %s (%s seq %d) was never acknowledged", m.id, m.account, m.seq)
			continue
		}
		kept = append(kept, m)
	}
	for _, m := range r.extra {
		if m.outcome == accepted {
			kept = append(kept, m.message)
		}
	}
	for _, m := range kept {
		s, ok := states[m.id]
		if !ok {
			bad("stored: %s (%s seq %d) acknowledged but not found", m.id, m.account, m.seq)
			continue
		}
		if s.Wamid != "" && !atProvider[m.id+" "+s.Wamid] {
			bad("stored: %s (%s seq %d) holds wamid %s, which the provider did not give it", m.id, m.account, m.seq, s.Wamid)
		}
		if want := r.want(m.id, s, atProvider); s.Status != want {
			r.tap.mu.Lock()
			acked := r.tap.acked[m.id]
			r.tap.mu.Unlock()
			bad("status: %s (%s seq %d) is %s under wamid %q, want %s (receipts acknowledged: %v, attempts %d)", m.id, m.account, m.seq, s.Status, s.Wamid, want, acked, s.Attempts)
		}
	}
	r.checkProvider(states, res, bad)
	// 7: refused messages are not stored (and, above, never sent).
	r.checkRefused(ctx, bad)

	// 4: the provider's limits.
	if st.Totals.OverLimit != 0 || st.Totals.PairOverLimit != 0 {
		bad("limits: %d sends over the throughput limit and %d over the pair limit at the provider (peak %d/s, limit %d/s)",
			st.Totals.OverLimit, st.Totals.PairOverLimit, st.Totals.PeakAcceptedPerSec, simRate)
	}

	// 6: events.
	r.sink.mu.Lock()
	for _, m := range kept {
		if s, ok := states[m.id]; ok && !r.sink.statuses[m.id][s.Status] {
			bad("events: %s is %s; the subscriber got %v", m.id, s.Status, keys(r.sink.statuses[m.id]))
		}
	}
	for _, o := range r.sink.outOfOrder {
		bad("events: out of version order: %s", o)
	}
	if r.sink.badSig != 0 {
		bad("events: %d deliveries did not verify", r.sink.badSig)
	}
	r.sink.mu.Unlock()

	// 8: slow clients and the flood stalled no producer.
	if res.MaxLatency > stallBound {
		bad("stall: a producer's request took %s to be answered (bound %s)", res.MaxLatency.Round(time.Millisecond), stallBound)
	}

	r.mu.Lock()
	gw := r.gw
	r.mu.Unlock()
	if gw != nil {
		if s := gw.Stderr(); strings.Contains(s, "panic") {
			bad("gateway panicked:\n%s", s)
		}
	}
}

// refusedSample bounds how many refused msg_ids are looked up one by one;
// all of them are checked against the provider's record.
const refusedSample = 200

// checkRefused: a message refused with 429 or queue_full is not stored
// (GET answers 404) and never reaches the provider.
func (r *round) checkRefused(ctx context.Context, bad func(string, ...any)) {
	var ids []string
	for id, m := range r.extra {
		if m.outcome == refused {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	step := max(1, len(ids)/refusedSample)
	gw, err := r.gateway(ctx)
	if err != nil {
		return
	}
	for i := 0; i < len(ids); i += step {
		code, raw, err := gw.Call(ctx, apiKey, "GET", "/v1/messages/"+ids[i], "")
		if err == nil && code != http.StatusNotFound {
			bad("refused: %s was refused, GET answers %d %.200s", ids[i], code, raw)
		}
	}
}

// checkProvider checks invariants 2 and 3: at the provider, each msg_id
// once but for counted resends, in client_seq order per recipient; and
// nothing refused.
func (r *round) checkProvider(states map[string]state, res *Result, bad func(string, ...any)) {
	seen := map[string]int{}
	last := map[string]int64{}
	for _, pm := range r.sim.Messages("", "") {
		m, ok := r.byID[pm.CallbackData]
		if !ok {
			e, ok := r.extra[pm.CallbackData]
			if !ok {
				bad("provider: accepted a message with unknown callback data %q", pm.CallbackData)
				continue
			}
			if e.outcome == refused {
				bad("refused: %s was refused but reached the provider", e.id)
			}
			m = &e.message
		}
		seen[m.id]++
		if seen[m.id] > 1 || m.seq == 0 {
			continue
		}
		key := m.account + "/" + m.to
		if m.seq <= last[key] {
			bad("order: %s got seq %d after seq %d", key, m.seq, last[key])
		}
		last[key] = m.seq
	}
	for id, n := range seen {
		res.AtProvider++
		if s, ok := states[id]; ok && n > 1 {
			res.Resends += n - 1
			if a := s.Attempts; n > a {
				bad("once: %s accepted %d times by the provider, the gateway counts %d attempts", id, n, a)
			}
		}
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// ErrViolations is returned by Run when a round broke an invariant.
var ErrViolations = errors.New("chaos: invariants broken")
