package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wamux/wamux"
)

// abuse is a round's clients that do not play by the rules, drawn from
// the seed apart from the other draws.
type abuse struct {
	drop  float64    // tap: status webhooks lost for good
	flood *floodPlan // nil: no flood
	slow  *slowPlan  // nil: no slow clients
}

// floodPlan is a client submitting far past an account's queue bound,
// ignoring every Retry-After.
type floodPlan struct {
	own   bool // its own account accF at rate; else the producers' acc1
	rate  int
	batch int // items per request
}

// slowPlan is clients that hold the gateway's connections: idle or
// trickling request headers, trickling a batch body, reading an answer
// a few bytes at a time.
type slowPlan struct {
	idle, bodies, readers int
}

const (
	// maxConnections is the gateway's connection cap; the slow clients
	// hold at most a fifth of it, under the 90 % where it starts closing
	// idle keep-alive connections.
	maxConnections = 256
	floodKey       = "chaos-flood-key-0123456789ab"
	slowKey        = "chaos-slow-key-0123456789abcd"
	// While a flood runs: a queue bound of one second of each account's
	// rate, and request buckets (keyRate a second, keyBurst at once) small
	// enough for the flood to empty.
	keyRate, keyBurst = 50, 20
	// After the traffic, the checker's reads are not to be limited.
	openSettings = `{"key_rate":1000000,"key_burst":1000000}`
	// floodSenders send the flood's requests side by side;
	// floodMaxRequests ends a flood that was never refused.
	floodSenders     = 4
	floodMaxRequests = 200
	// stallBound is the longest a producer's request may wait for its
	// answer. Slow clients hold on until the producers are done, so a
	// producer they stalled would wait for a server timeout (10 s for
	// headers, 60 s for a body) at least.
	stallBound = 8 * time.Second
	// producerWaitMax caps how long a producer honours a Retry-After: it
	// retries sooner than asked, as an impatient client does, and is
	// refused again.
	producerWaitMax = 300 * time.Millisecond
)

var floodSettings = fmt.Sprintf(`{"queue_max_backlog":"1s","key_rate":%d,"key_burst":%d}`, keyRate, keyBurst)

func drawAbuse(seed uint64) abuse {
	rng := mrand.New(mrand.NewPCG(seed, 2))
	a := abuse{drop: rng.Float64() * 0.1}
	if rng.IntN(2) == 0 {
		a.flood = &floodPlan{own: rng.IntN(2) == 0, rate: 20 + rng.IntN(41), batch: 20 + rng.IntN(81)}
	}
	if rng.IntN(2) == 0 {
		a.slow = &slowPlan{idle: 5 + rng.IntN(40), bodies: 1 + rng.IntN(3), readers: 1 + rng.IntN(3)}
	}
	return a
}

// outcome is what became of a message a flood or slow client submitted.
type outcome int

const (
	unanswered outcome = iota // no answer: it may or may not be stored
	accepted                  // answered without error: it must be kept and sent
	refused                   // answered 429 or queue_full: it must not exist
)

// extraMsg is a message of a flood or slow client.
type extraMsg struct {
	message
	outcome outcome
}

// abuseStats counts what the flood and slow clients saw.
type abuseStats struct {
	FloodRequests, FloodAccepted, QueueFull, RateLimited, Unanswered int
	SlowAccepted                                                     int
}

func (s abuseStats) String() string {
	return fmt.Sprintf("flood_requests=%d flood_accepted=%d queue_full=%d rate_limited=%d unanswered=%d slow_accepted=%d",
		s.FloodRequests, s.FloodAccepted, s.QueueFull, s.RateLimited, s.Unanswered, s.SlowAccepted)
}

// violate records a broken invariant seen while the round runs.
func (r *round) violate(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.violations) < 50 {
		r.violations = append(r.violations, fmt.Sprintf(format, args...))
	}
}

// newExtra makes n messages of a flood or slow client for account, with
// msg_ids of their own and no client_seq.
func (r *round) newExtra(kind, account string, n int) []*extraMsg {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*extraMsg, n)
	for i := range out {
		r.extraN++
		id := fmt.Sprintf("%s-%06d", kind, r.extraN)
		to := fmt.Sprintf("1555900%04d", r.extraN%64)
		m := &extraMsg{message: message{id: id, account: account, to: to}}
		m.item = fmt.Sprintf(`{"msg_id":%q,"biz_type":%q,"account_id":%q,"to":%q,"type":"text","text":{"body":%q}}`,
			id, kind, account, to, id)
		r.extra[id] = m
		out[i] = m
	}
	return out
}

func batchBody(ms []*extraMsg) string {
	items := make([]string, len(ms))
	for i, m := range ms {
		items[i] = m.item
	}
	return `{"messages":[` + strings.Join(items, ",") + `]}`
}

type batchResult struct {
	MsgID string `json:"msg_id"`
	Error *struct {
		Code       string `json:"code"`
		RetryAfter int    `json:"retry_after"`
	} `json:"error"`
}

// retryAfter checks the Retry-After of a refusal (a whole-request 429 or
// a batch with refused items): present, whole seconds, at least one and
// at least the longest any item asks. It returns the wait.
func (r *round) retryAfter(who string, h http.Header, items []batchResult) time.Duration {
	v := h.Get("Retry-After")
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		r.violate("backpressure: %s refused with Retry-After %q", who, v)
		return time.Second
	}
	for _, it := range items {
		if it.Error != nil && it.Error.RetryAfter > n {
			r.violate("backpressure: %s: an item asks to retry after %d s, the answer's Retry-After is %d", who, it.Error.RetryAfter, n)
		}
	}
	return time.Duration(n) * time.Second
}

// whole429 checks a request refused as a whole: 429 rate_limited with
// Retry-After.
func (r *round) whole429(who string, rep Reply) time.Duration {
	var e struct {
		Error struct {
			Code       string `json:"code"`
			RetryAfter int    `json:"retry_after"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rep.Body, &e); err != nil || e.Error.Code != wamux.ERateLimited {
		r.violate("backpressure: %s answered 429 %s, want code %s", who, rep.Body, wamux.ERateLimited)
	}
	wait := r.retryAfter(who, rep.Header, nil)
	if e.Error.RetryAfter != int(wait/time.Second) {
		r.violate("backpressure: %s: retry_after %d in the body, Retry-After %s", who, e.Error.RetryAfter, rep.Header.Get("Retry-After"))
	}
	return wait
}

// settleBatch records the outcome of each item of a batch of extra
// messages answered 200, and returns how many were accepted and refused.
func (r *round) settleBatch(who string, ms []*extraMsg, rep Reply) (ok, full int) {
	var out struct {
		Results []batchResult `json:"results"`
	}
	if err := json.Unmarshal(rep.Body, &out); err != nil || len(out.Results) != len(ms) {
		r.violate("%s: batch answer %d %.200s", who, rep.Code, rep.Body)
		return 0, 0
	}
	var bad []string
	r.mu.Lock()
	for i, res := range out.Results {
		m := ms[i]
		switch {
		case res.Error == nil && res.MsgID != m.id:
			bad = append(bad, fmt.Sprintf("%s: item %d answered msg_id %s, want %s", who, i, res.MsgID, m.id))
		case res.Error == nil:
			m.outcome = accepted
			r.acked[m.id] = true
			ok++
		case res.Error.Code == wamux.EQueueFull:
			m.outcome = refused
			full++
		default:
			bad = append(bad, fmt.Sprintf("%s: item %s refused with %s, want %s", who, m.id, res.Error.Code, wamux.EQueueFull))
		}
	}
	r.mu.Unlock()
	for _, b := range bad {
		r.violate("%s", b)
	}
	if full > 0 {
		r.retryAfter(who, rep.Header, out.Results)
	}
	return ok, full
}

// refuseAll records a batch refused as a whole.
func (r *round) refuseAll(ms []*extraMsg) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range ms {
		m.outcome = refused
	}
}

// floodRequest is one answered request of the flood: when it left, when
// its answer came, to which gateway process, and whether it was refused
// by the key's bucket.
type floodRequest struct {
	gw         *Gateway
	start, end time.Time
	limited    bool
}

// flood submits batches to its account from floodSenders clients side by
// side, never waiting, until it has been refused queue_full and the
// producers are done, or it has made floodMaxRequests answered requests.
func (r *round) flood(ctx context.Context, produced <-chan struct{}) {
	account := "acc1"
	if r.a.flood.own {
		account = "accF"
	}
	var (
		mu   sync.Mutex
		st   abuseStats
		reqs []floodRequest
		wg   sync.WaitGroup
	)
	more := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return st.FloodRequests < floodMaxRequests && !(st.QueueFull > 0 && stopped(produced)) && ctx.Err() == nil
	}
	for range floodSenders {
		wg.Go(func() {
			for more() {
				gw, err := r.gateway(ctx)
				if err != nil {
					return
				}
				ms := r.newExtra("flood", account, r.a.flood.batch)
				start := time.Now()
				rep, err := gw.Do(ctx, floodKey, "POST", "/v1/messages:batch", batchBody(ms))
				req := floodRequest{gw: gw, start: start, end: time.Now(), limited: rep.Code == http.StatusTooManyRequests}
				var ok, full int
				switch {
				case err != nil:
				case req.limited:
					r.whole429("the flood", rep)
					r.refuseAll(ms)
				case rep.Code == http.StatusOK:
					ok, full = r.settleBatch("the flood", ms, rep)
				case rep.Code/100 != 5:
					r.violate("backpressure: the flood's batch answered %d %.200s", rep.Code, rep.Body)
				}
				mu.Lock()
				if err != nil || rep.Code/100 == 5 {
					st.Unanswered += len(ms) // the gateway died, or is starting
				} else {
					st.FloodRequests++
					reqs = append(reqs, req)
				}
				if req.limited {
					st.RateLimited++
				}
				st.FloodAccepted += ok
				st.QueueFull += full
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if st.QueueFull == 0 && ctx.Err() == nil {
		r.violate("backpressure: the flood made %d requests of %d messages each to %s, none refused queue_full",
			st.FloodRequests, r.a.flood.batch, account)
	}
	r.checkKeyRate(reqs)
	r.mu.Lock()
	r.stats.FloodRequests, r.stats.FloodAccepted = st.FloodRequests, st.FloodAccepted
	r.stats.QueueFull += st.QueueFull
	r.stats.RateLimited += st.RateLimited
	r.stats.Unanswered += st.Unanswered
	r.mu.Unlock()
}

// checkKeyRate: the flood's key got past its bucket no more than the
// bucket allows. Requests that left at or after one request's start and
// were answered by another's end reached the gateway inside that window
// of length T; at most keyBurst + keyRate×T of them may pass (per gateway
// process: a restart starts with a full bucket).
func (r *round) checkKeyRate(reqs []floodRequest) {
	for _, from := range reqs {
		for _, to := range reqs {
			if to.gw != from.gw || to.end.Before(from.start) {
				continue
			}
			passed := 0
			for _, q := range reqs {
				if q.gw == from.gw && !q.limited && !q.start.Before(from.start) && !q.end.After(to.end) {
					passed++
				}
			}
			if allowed := float64(keyBurst) + keyRate*to.end.Sub(from.start).Seconds(); float64(passed) > allowed {
				r.violate("backpressure: the flood's key passed %d requests in %s, its bucket allows %.1f (key_rate %d, key_burst %d)",
					passed, to.end.Sub(from.start).Round(time.Millisecond), allowed, keyRate, keyBurst)
				return
			}
		}
	}
}

// slowClients runs the round's slow clients until the producers are done.
func (r *round) slowClients(ctx context.Context, produced <-chan struct{}) {
	var wg sync.WaitGroup
	run := func(n int, f func(int)) {
		for i := range n {
			wg.Add(1)
			go func() { defer wg.Done(); f(i) }()
		}
	}
	run(r.a.slow.idle, func(i int) { r.idleConn(ctx, produced, i%2 == 1) })
	run(r.a.slow.bodies, func(int) { r.slowBody(ctx, produced) })
	run(r.a.slow.readers, func(int) { r.slowReader(ctx, produced) })
	wg.Wait()
}

// dial connects to the running gateway.
func (r *round) dial(ctx context.Context) (net.Conn, string, error) {
	gw, err := r.gateway(ctx)
	if err != nil {
		return nil, "", err
	}
	host := strings.TrimPrefix(gw.Base, "http://")
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", host)
	return c, host, err
}

func stopped(produced <-chan struct{}) bool {
	select {
	case <-produced:
		return true
	default:
		return false
	}
}

// idleConn holds a connection open until the producers are done: silent,
// or (trickle) sending a request's headers a byte every 200 ms. It dials
// again when the gateway closes it.
func (r *round) idleConn(ctx context.Context, produced <-chan struct{}, trickle bool) {
	head := "GET /healthz HTTP/1.1\r\nHost: chaos\r\n" + strings.Repeat("X-Slow: 0123456789\r\n", 200)
	for !stopped(produced) && ctx.Err() == nil {
		c, _, err := r.dial(ctx)
		if err != nil {
			pause(ctx)
			continue
		}
		buf := make([]byte, 512)
		for sent := 0; !stopped(produced); {
			if trickle && sent < len(head) {
				if _, err := c.Write([]byte{head[sent]}); err != nil {
					break
				}
				sent++
			}
			_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if _, err := c.Read(buf); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					continue
				}
				break // closed by the gateway (header timeout) or the gateway died
			}
		}
		c.Close()
	}
}

// slowBody sends batches whose bodies trickle in, a byte every 20 ms,
// until the producers are done; then it sends the rest and records what
// the gateway answered for each item.
func (r *round) slowBody(ctx context.Context, produced <-chan struct{}) {
	for ctx.Err() == nil {
		ms := r.newExtra("slow", "acc1", 5)
		if err := r.slowBatch(ctx, produced, ms); err != nil {
			r.mu.Lock()
			r.stats.Unanswered += len(ms)
			r.mu.Unlock()
		}
		if stopped(produced) {
			return
		}
	}
}

func (r *round) slowBatch(ctx context.Context, produced <-chan struct{}, ms []*extraMsg) error {
	body := batchBody(ms)
	c, host, err := r.dial(ctx)
	if err != nil {
		pause(ctx)
		return err
	}
	defer c.Close()
	_, err = fmt.Fprintf(c, "POST /v1/messages:batch HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", host, slowKey, len(body))
	sent := 0
	for ; err == nil && sent < len(body) && !stopped(produced); sent++ {
		_, err = c.Write([]byte{body[sent]})
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	if err == nil {
		_, err = c.Write([]byte(body[sent:]))
	}
	if err != nil {
		return err
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	rep := Reply{Code: res.StatusCode, Header: res.Header}
	if rep.Body, err = readAll(res); err != nil {
		return err
	}
	r.slowAnswer(ms, rep)
	return nil
}

// pause waits a little before dialling again a gateway that just died.
func pause(ctx context.Context) {
	select {
	case <-time.After(10 * time.Millisecond):
	case <-ctx.Done():
	}
}

func readAll(res *http.Response) ([]byte, error) {
	defer res.Body.Close()
	var b strings.Builder
	_, err := bufio.NewReader(res.Body).WriteTo(&b)
	return []byte(b.String()), err
}

func (r *round) slowAnswer(ms []*extraMsg, rep Reply) {
	var st abuseStats
	switch {
	case rep.Code == http.StatusOK:
		st.SlowAccepted, st.QueueFull = r.settleBatch("a slow body", ms, rep)
	case rep.Code == http.StatusTooManyRequests:
		r.whole429("a slow body", rep)
		st.RateLimited++
		r.refuseAll(ms)
	case rep.Code/100 == 5:
		st.Unanswered += len(ms)
	default:
		r.violate("a slow body's batch answered %d %.200s", rep.Code, rep.Body)
	}
	r.mu.Lock()
	r.stats.SlowAccepted += st.SlowAccepted
	r.stats.QueueFull += st.QueueFull
	r.stats.RateLimited += st.RateLimited
	r.stats.Unanswered += st.Unanswered
	r.mu.Unlock()
}

// slowReader asks for the event feed and reads the answer 16 bytes every
// 20 ms through a small receive buffer, until the producers are done.
func (r *round) slowReader(ctx context.Context, produced <-chan struct{}) {
	buf := make([]byte, 16)
	for !stopped(produced) && ctx.Err() == nil {
		c, host, err := r.dial(ctx)
		if err != nil {
			pause(ctx)
			continue
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(1024)
		}
		_, err = fmt.Fprintf(c, "GET /v1/events?limit=1000 HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", host, slowKey)
		for err == nil && !stopped(produced) {
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			if _, err = c.Read(buf); err == nil {
				select {
				case <-time.After(20 * time.Millisecond):
				case <-ctx.Done():
				}
			} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
				err = nil // nothing to read yet: a long answer being made
			}
		}
		c.Close()
	}
}

func (a abuse) String() string {
	s := fmt.Sprintf("hooks lost %.1f%%", 100*a.drop)
	if f := a.flood; f != nil {
		acc := "acc1"
		if f.own {
			acc = fmt.Sprintf("accF at %d/s", f.rate)
		}
		s += fmt.Sprintf(", flood of %d-message batches to %s", f.batch, acc)
	}
	if sl := a.slow; sl != nil {
		s += fmt.Sprintf(", slow clients: %d idle, %d trickling bodies, %d slow readers", sl.idle, sl.bodies, sl.readers)
	}
	return s
}
