package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wamux/wamux/webhooksig"
)

// sink is the business's event endpoint: a slow client that takes a
// random time per delivery, sometimes answers 500 without keeping the
// event, dedups by webhook-id and keeps per message the statuses it got
// and any version that arrived (first time) after a higher one.
type sink struct {
	srv      *http.Server
	URL      string
	verifier atomic.Pointer[webhooksig.Verifier]
	stop     chan struct{}

	mu         sync.Mutex
	rng        *rand.Rand
	slow       time.Duration
	fail       float64
	seen       map[string]bool
	statuses   map[string]map[string]bool // msg_id → statuses received
	version    map[string]int64
	outOfOrder []string
	badSig     int64
	received   int64
}

func startSink(seed uint64, slow time.Duration, fail float64) (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{URL: "http://" + ln.Addr().String() + "/events", stop: make(chan struct{}),
		rng: rand.New(rand.NewPCG(seed, 0xe7)), slow: slow, fail: fail,
		seen: map[string]bool{}, statuses: map[string]map[string]bool{}, version: map[string]int64{}}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *sink) Close() error {
	close(s.stop)
	return s.srv.Close()
}

func (s *sink) setSecret(secret string) error {
	v, err := webhooksig.NewVerifier(secret)
	if err != nil {
		return err
	}
	s.verifier.Store(v)
	return nil
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.received++
	delay := time.Duration(s.rng.Int64N(int64(s.slow) + 1))
	fail := s.rng.Float64() < s.fail
	s.mu.Unlock()
	select {
	case <-time.After(delay):
	case <-r.Context().Done():
		return
	case <-s.stop:
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if fail {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	v := s.verifier.Load()
	if v == nil || v.Verify(r.Header, body) != nil {
		s.mu.Lock()
		s.badSig++
		s.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var ev struct {
		Type string `json:"type"`
		Data struct {
			MsgID   string `json:"msg_id"`
			Status  string `json:"status"`
			Version int64  `json:"version"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	id := r.Header.Get(webhooksig.HeaderID)
	s.mu.Lock()
	if !s.seen[id] && ev.Type == "message.status" {
		s.seen[id] = true
		m := ev.Data.MsgID
		if s.statuses[m] == nil {
			s.statuses[m] = map[string]bool{}
		}
		s.statuses[m][ev.Data.Status] = true
		if ev.Data.Version <= s.version[m] {
			s.outOfOrder = append(s.outOfOrder, fmt.Sprintf("%s: version %d (%s) after %d", m, ev.Data.Version, ev.Data.Status, s.version[m]))
		} else {
			s.version[m] = ev.Data.Version
		}
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (s *sink) has(msgID, status string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statuses[msgID][status]
}
