package bench

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wamux/wamux/webhooksig"
)

// eventReceiver is a business's endpoint for wamux's events: it checks
// each delivery's signature (401 when it does not verify), answers 204,
// and keeps what it got — per webhook-id (repeats are duplicates), per
// message the status of the highest version seen (a lower version after
// it is out of order), counts by type, and the time from each event's
// commit to its arrival.
type eventReceiver struct {
	URL string
	srv *http.Server
	ln  net.Listener

	verifier atomic.Pointer[webhooksig.Verifier]

	mu            sync.Mutex
	seen          map[string]bool // webhook-ids
	received      int64           // deliveries answered 204, repeats included
	duplicates    int64
	badSignatures int64
	byType        map[string]int64
	outOfOrder    int64
	last          map[string]statusSeen // by msg_id
	latencyMs     []float64             // of each distinct event
	first, latest time.Time             // arrival of the first and the latest distinct event
	// want and reached: reached is closed once len(seen) reaches want.
	want    int
	reached chan struct{}
}

// statusSeen is the status of a message's highest version received.
type statusSeen struct {
	version int64
	status  string
}

// eventBody is what the receiver reads of a delivery.
type eventBody struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      struct {
		MsgID   string `json:"msg_id"`
		Status  string `json:"status"`
		Version int64  `json:"version"`
	} `json:"data"`
}

// startEventReceiver listens on a free loopback port.
func startEventReceiver() (*eventReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &eventReceiver{URL: "http://" + ln.Addr().String() + "/events", ln: ln,
		seen: map[string]bool{}, byType: map[string]int64{}, last: map[string]statusSeen{}}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// Close stops the server and its connections.
func (r *eventReceiver) Close() error { return r.srv.Close() }

// setSecret sets the subscription's secret the signatures are checked
// against; until then every delivery is refused.
func (r *eventReceiver) setSecret(secret string) error {
	v, err := webhooksig.NewVerifier(secret)
	if err != nil {
		return err
	}
	r.verifier.Store(v)
	return nil
}

func (r *eventReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	now := time.Now()
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	v := r.verifier.Load()
	if v == nil || v.Verify(req.Header, body) != nil {
		r.mu.Lock()
		r.badSignatures++
		r.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var ev eventBody
	if err := json.Unmarshal(body, &ev); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	id := req.Header.Get(webhooksig.HeaderID)
	var lat float64
	if ts, err := time.Parse(time.RFC3339Nano, ev.Timestamp); err == nil {
		lat = float64(now.Sub(ts).Microseconds()) / 1000
	}
	r.record(id, ev, now, lat)
	w.WriteHeader(http.StatusNoContent)
}

func (r *eventReceiver) record(id string, ev eventBody, now time.Time, latencyMs float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.received++
	if r.seen[id] {
		r.duplicates++
		return
	}
	r.seen[id] = true
	r.byType[ev.Type]++
	r.latencyMs = append(r.latencyMs, latencyMs)
	if r.first.IsZero() {
		r.first = now
	}
	r.latest = now
	if ev.Type == "message.status" && ev.Data.MsgID != "" {
		prev, ok := r.last[ev.Data.MsgID]
		switch {
		case ok && ev.Data.Version < prev.version:
			r.outOfOrder++
		default:
			r.last[ev.Data.MsgID] = statusSeen{ev.Data.Version, ev.Data.Status}
		}
	}
	if r.reached != nil && len(r.seen) >= r.want {
		close(r.reached)
		r.reached = nil
	}
}

// lastStatus is the status of the highest version received for msgID.
func (r *eventReceiver) lastStatus(msgID string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.last[msgID]
	return s.status, ok
}

// receiverCounts is a snapshot of what a receiver got.
type receiverCounts struct {
	received, distinct, duplicates, badSignatures, outOfOrder int64
	byType                                                    map[string]int64
	first, latest                                             time.Time
}

func (r *eventReceiver) counts() receiverCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	by := make(map[string]int64, len(r.byType))
	for k, v := range r.byType {
		by[k] = v
	}
	return receiverCounts{received: r.received, distinct: int64(len(r.seen)), duplicates: r.duplicates,
		badSignatures: r.badSignatures, outOfOrder: r.outOfOrder, byType: by, first: r.first, latest: r.latest}
}

// expect returns a channel closed once n distinct events have arrived in
// all.
func (r *eventReceiver) expect(n int) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := make(chan struct{})
	if len(r.seen) >= n {
		close(ch)
		return ch
	}
	r.want, r.reached = n, ch
	return ch
}

// has reports whether the event with that webhook-id arrived.
func (r *eventReceiver) has(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[id]
}

// takeLatencies returns the latencies gathered since the last call and
// the arrival times of that span's first and latest events, and starts a
// new span.
func (r *eventReceiver) takeLatencies() (lat []float64, first, latest time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lat, first, latest = r.latencyMs, r.first, r.latest
	r.latencyMs, r.first, r.latest = nil, time.Time{}, time.Time{}
	return lat, first, latest
}
