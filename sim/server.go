package sim

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/httpserve"
)

// Server is the simulator. It is an http.Handler, so it can be mounted in
// httptest or any server; Start runs it on a listener of its own.
type Server struct {
	cfg   Config
	log   *slog.Logger
	mux   *http.ServeMux
	hooks *webhooker // nil without a webhook URL

	numMu   sync.RWMutex
	numbers map[string]*number

	seq            atomic.Int64  // acceptance order across numbers
	wamidSeq       atomic.Uint64 // never reset, so wamids stay unique
	records        atomic.Int64
	recordsDropped atomic.Int64
	unknownNumber  atomic.Int64
	callbacks      *callbackSet

	done        chan struct{}
	trafficDone chan struct{} // nil without inbound traffic
	closeOnce   sync.Once
	srvMu       sync.Mutex
	srv         *http.Server
	srvDone     chan struct{}
}

// New builds a Server from cfg. It starts the webhook sender when a URL is
// configured, and the users' inbound traffic when it has a rate; call
// Close to stop them.
func New(cfg Config) (*Server, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{
		cfg: cfg, log: log, numbers: make(map[string]*number),
		done: make(chan struct{}), callbacks: newCallbackSet(),
	}
	for _, n := range cfg.Numbers {
		if err := s.AddNumber(n); err != nil {
			return nil, err
		}
	}
	if cfg.Webhooks.URL != "" {
		s.hooks = newWebhooker(cfg.Webhooks, log)
	}
	s.routes()
	if cfg.Inbound.Rate > 0 {
		s.trafficDone = make(chan struct{})
		go s.runTraffic(cfg.Clock())
	}
	return s, nil
}

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /{version}/{phone_number_id}/messages", s.handleSend)
	s.mux.HandleFunc("GET /sim/stats", s.handleStats)
	s.mux.HandleFunc("GET /sim/messages", s.handleMessages)
	s.mux.HandleFunc("POST /sim/reset", s.handleReset)
	s.mux.HandleFunc("GET /sim/numbers", s.handleListNumbers)
	s.mux.HandleFunc("POST /sim/numbers", s.handleAddNumber)
	s.mux.HandleFunc("PUT /sim/numbers/{id}/faults", s.handleSetFaults)
	s.mux.HandleFunc("POST /sim/numbers/{id}/inbound", s.handleInbound)
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
}

// Handle mounts an extra handler (e.g. profiling) next to the simulator's
// own routes; call it before serving.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// ServeHTTP serves the Cloud API send endpoint and the /sim endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// AddNumber registers a phone number, or replaces its token, limits and
// faults (keeping its history) when it exists. Requests in flight while a
// number is replaced may be counted on the old copy and lost.
func (s *Server) AddNumber(n Number) error {
	if n.PhoneNumberID == "" || n.AccessToken == "" {
		return wamux.Errorf(wamux.EInvalid, "a number needs a phone_number_id and an access_token")
	}
	if n.Limits.Rate < 0 || n.Limits.Burst < 0 || n.Limits.PairInterval < 0 || n.Limits.PairBurst < 0 {
		return wamux.Errorf(wamux.EInvalid, "limits must not be negative")
	}
	if l := s.cfg.Limits.over(n.Limits); l.StrictSecond && l.Rate > StrictSecondMaxRate {
		return wamux.Errorf(wamux.EInvalid, "strict_second needs a rate of at most %d", StrictSecondMaxRate)
	}
	faults := s.cfg.Faults
	if n.Faults != nil {
		faults = *n.Faults
		if err := faults.check(); err != nil {
			return wamux.Errorf(wamux.EInvalid, "%v", err)
		}
		n.Faults = &faults
	}
	nb := newNumber(n, s.cfg.Limits, faults, s.cfg.Seed)
	s.numMu.Lock()
	defer s.numMu.Unlock()
	if old, ok := s.numbers[n.PhoneNumberID]; ok {
		old.mu.Lock()
		nb.tat, nb.pairs, nb.rng, nb.st, nb.msgs = old.tat, old.pairs, old.rng, old.st, old.msgs
		nb.windows, nb.pruneAt, nb.windowPruneAt = old.windows, old.pruneAt, old.windowPruneAt
		if len(old.second) == len(nb.second) {
			nb.second, nb.secondNext = old.second, old.secondNext
		}
		old.mu.Unlock()
	}
	s.numbers[n.PhoneNumberID] = nb
	return nil
}

// SetFaults changes the faults of one number while it serves, e.g. to
// make an account fail mid-run. An unknown number is a not_found error.
func (s *Server) SetFaults(phoneNumberID string, f Faults) error {
	if err := f.check(); err != nil {
		return wamux.Errorf(wamux.EInvalid, "%v", err)
	}
	nb := s.number(phoneNumberID)
	if nb == nil {
		return wamux.Errorf(wamux.ENotFound, "no number %q", phoneNumberID)
	}
	nb.mu.Lock()
	nb.setFaultsLocked(f)
	nb.mu.Unlock()
	return nil
}

func (s *Server) number(id string) *number {
	s.numMu.RLock()
	defer s.numMu.RUnlock()
	return s.numbers[id]
}

func (s *Server) allNumbers() []*number {
	s.numMu.RLock()
	defer s.numMu.RUnlock()
	out := make([]*number, 0, len(s.numbers))
	for _, nb := range s.numbers {
		out = append(out, nb)
	}
	return out
}

// Reset forgets all stats, records, limiter state and queued webhooks;
// numbers stay registered.
func (s *Server) Reset() {
	for _, nb := range s.allNumbers() {
		nb.mu.Lock()
		nb.resetLocked(s.cfg.Seed)
		nb.mu.Unlock()
	}
	s.callbacks.reset()
	s.records.Store(0)
	s.recordsDropped.Store(0)
	s.unknownNumber.Store(0)
	if s.hooks != nil {
		s.hooks.reset()
	}
}

// Start serves on addr (e.g. "127.0.0.1:0") until Close or until ctx is
// cancelled, and returns the base URL, e.g. "http://127.0.0.1:41234".
func (s *Server) Start(ctx context.Context, addr string) (string, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("sim: listen on %s: %w", addr, err)
	}
	hs := httpserve.New(s, 0, slog.NewLogLogger(s.log.Handler(), slog.LevelDebug))
	// Injected faults hold answers for as long as they are told to.
	hs.WriteTimeout = 0
	srv := hs.Server
	s.srvMu.Lock()
	if s.srv != nil {
		s.srvMu.Unlock()
		ln.Close()
		return "", errors.New("sim: already started")
	}
	s.srv, s.srvDone = srv, make(chan struct{})
	s.srvMu.Unlock()
	go func() {
		defer close(s.srvDone)
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("sim: serve", "err", err)
		}
	}()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	go func() {
		<-s.done
		stop()
	}()
	return "http://" + ln.Addr().String(), nil
}

// Close stops the listener (if Start was used), answers waiting slow
// requests, and stops the webhook sender. It waits for all of them.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		s.srvMu.Lock()
		srv, srvDone := s.srv, s.srvDone
		s.srvMu.Unlock()
		if srv != nil {
			srv.Close()
			<-srvDone
		}
		if s.trafficDone != nil {
			<-s.trafficDone
		}
		if s.hooks != nil {
			s.hooks.close()
		}
	})
	return nil
}

// callbackSet remembers every biz_opaque_callback_data accepted, across
// numbers, sharded so that concurrent sends rarely share a lock.
type callbackSet struct {
	seed   maphash.Seed
	shards [64]struct {
		mu  sync.Mutex
		set map[string]struct{}
	}
}

func newCallbackSet() *callbackSet {
	c := &callbackSet{seed: maphash.MakeSeed()}
	c.reset()
	return c
}

func (c *callbackSet) reset() {
	for i := range c.shards {
		c.shards[i].mu.Lock()
		c.shards[i].set = make(map[string]struct{})
		c.shards[i].mu.Unlock()
	}
}

// add reports whether v was new.
func (c *callbackSet) add(v string) bool {
	sh := &c.shards[maphash.String(c.seed, v)%uint64(len(c.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.set[v]; ok {
		return false
	}
	sh.set[v] = struct{}{}
	return true
}
