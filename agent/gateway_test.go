package agent

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/sqlite"
)

const (
	testKey     = "test-key-7f3a"
	testAccount = "acct-1"
)

// gwMode is how the test gateway answers one request.
type gwMode int

const (
	gwOK             gwMode = iota // store, then 200
	gwFail                         // 503 without storing
	gwHang                         // hold the request until the client gives up or the test releases it, then 503
	gwLoseAck                      // store, then 503: the ack is lost on the way
	gwReject                       // 400 without storing
	gwThrottle                     // 429 with Retry-After: 7 without storing
	gwForbidden                    // 403: the key has no right to post receipts
	gwNoRoute                      // 404 in plain text: a server that does not serve the route
	gwUnknownAccount               // 400 "unknown account_id …", as the real gateway answers
	gwConflict                     // 409: some other 4xx, bad input that retrying cannot fix
)

// gateway implements the POST /v1/receipts:batch contract on the real
// SQLite store, and can be told to fail, hang or lose acks.
type gateway struct {
	srv    *httptest.Server
	store  *sqlite.Store
	dbPath string

	hanging chan struct{} // gets a value when a request starts to hang
	release chan struct{} // closed to let hanging requests go

	poisonID string // a batch holding a receipt with this id is refused (400)

	mu         sync.Mutex
	key        string   // the API key it accepts; testKey unless setKey changed it
	script     []gwMode // consumed one per request before mode applies
	mode       gwMode
	requests   int
	sizes      []int                    // receipts per request that reached the store
	seen       map[store.ReceiptKey]int // times each receipt reached the store
	accepted   int
	duplicates int
}

func newGateway(t testing.TB) *gateway {
	t.Helper()
	g := &gateway{
		dbPath:  filepath.Join(t.TempDir(), "gateway.db"),
		hanging: make(chan struct{}, 1),
		release: make(chan struct{}),
		seen:    make(map[store.ReceiptKey]int),
		key:     testKey,
	}
	st, err := sqlite.Open(context.Background(), g.dbPath, sqlite.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	g.store = st
	g.srv = httptest.NewServer(g)
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() { close(g.release) })
		g.srv.Close()
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return g
}

func (g *gateway) setMode(m gwMode, script ...gwMode) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mode, g.script = m, script
}

// setKey makes the gateway accept key, and only key, from now on: a key
// rotated or added on the gateway's side.
func (g *gateway) setKey(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.key = key
}

func (g *gateway) next() gwMode {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.script) > 0 {
		m := g.script[0]
		g.script = g.script[1:]
		return m
	}
	return g.mode
}

type gwReceipt struct {
	MessageID string `json:"message_id"`
	Type      string `json:"type"`
	EventTime int64  `json:"event_time"`
	Version   *int   `json:"version"`
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.requests++
	key := g.key
	g.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/receipts:batch" {
		gwError(w, http.StatusNotFound, wamux.ENotFound, "no such endpoint")
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+key {
		gwError(w, http.StatusUnauthorized, wamux.EUnauthorized, "bad api key")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<20)
	var req struct {
		AccountID string      `json:"account_id"`
		Receipts  []gwReceipt `json:"receipts"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			gwError(w, http.StatusRequestEntityTooLarge, wamux.ETooLarge, "body over 8 MiB")
			return
		}
		gwError(w, http.StatusBadRequest, wamux.EInvalid, "malformed json")
		return
	}
	if req.AccountID == "" || len(req.Receipts) == 0 {
		gwError(w, http.StatusBadRequest, wamux.EInvalid, "account_id and receipts are required")
		return
	}
	rs := make([]wamux.Receipt, len(req.Receipts))
	for i, in := range req.Receipts {
		typ, err := wamux.ParseReceiptType(in.Type)
		want, fixed := map[wamux.ReceiptType]int{wamux.ReceiptSent: 1, wamux.ReceiptDelivered: 2, wamux.ReceiptRead: 3}[typ]
		badVersion := in.Version != nil && (*in.Version < 0 || (fixed && *in.Version != 0 && *in.Version != want))
		if err != nil || in.MessageID == "" || in.EventTime <= 0 || badVersion || (g.poisonID != "" && in.MessageID == g.poisonID) {
			gwError(w, http.StatusBadRequest, wamux.EInvalid, fmt.Sprintf("receipts[%d]: bad receipt", i))
			return
		}
		rs[i] = wamux.Receipt{MessageID: in.MessageID, AccountID: req.AccountID, Type: typ,
			EventTime: time.UnixMilli(in.EventTime), Source: "agent"}
	}

	mode := g.next()
	switch mode {
	case gwFail:
		gwError(w, http.StatusServiceUnavailable, wamux.EUnavailable, "try later")
		return
	case gwReject:
		gwError(w, http.StatusBadRequest, wamux.EInvalid, "rejected by test")
		return
	case gwForbidden:
		gwError(w, http.StatusForbidden, wamux.EForbidden, "key may not post receipts")
		return
	case gwNoRoute:
		http.NotFound(w, r)
		return
	case gwUnknownAccount:
		gwError(w, http.StatusBadRequest, wamux.EInvalid, fmt.Sprintf("unknown account_id %q", req.AccountID))
		return
	case gwConflict:
		gwError(w, http.StatusConflict, wamux.EConflict, "conflict by test")
		return
	case gwThrottle:
		w.Header().Set("Retry-After", "7")
		gwError(w, http.StatusTooManyRequests, wamux.ERateLimited, "slow down")
		return
	case gwHang:
		select {
		case g.hanging <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-g.release:
		}
		gwError(w, http.StatusServiceUnavailable, wamux.EUnavailable, "hung")
		return
	}
	isNew, err := g.store.InsertReceipts(r.Context(), rs)
	if err != nil {
		gwError(w, http.StatusServiceUnavailable, wamux.EUnavailable, "store")
		return
	}
	acc := 0
	g.mu.Lock()
	g.sizes = append(g.sizes, len(rs))
	for i, ok := range isNew {
		g.seen[store.ReceiptKey{MessageID: rs[i].MessageID, AccountID: rs[i].AccountID, Type: rs[i].Type}]++
		if ok {
			acc++
		}
	}
	g.accepted += acc
	g.duplicates += len(rs) - acc
	g.mu.Unlock()
	if mode == gwLoseAck {
		gwError(w, http.StatusServiceUnavailable, wamux.EUnavailable, "ack lost")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int{"accepted": acc, "duplicates": len(rs) - acc})
}

func gwError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

type gwCounts struct {
	requests, accepted, duplicates int
	sizes                          []int
	seen                           map[store.ReceiptKey]int
}

func (g *gateway) counts() gwCounts {
	g.mu.Lock()
	defer g.mu.Unlock()
	seen := make(map[store.ReceiptKey]int, len(g.seen))
	for k, v := range g.seen {
		seen[k] = v
	}
	return gwCounts{g.requests, g.accepted, g.duplicates, slices.Clone(g.sizes), seen}
}

// storedKeys reads every receipt row of the gateway's database, so a test
// can assert not only that what it expects is there but that nothing else
// is.
func (g *gateway) storedKeys(t *testing.T) map[store.ReceiptKey]int {
	t.Helper()
	db, err := sql.Open("sqlite", g.dbPath+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatalf("open db: %v", err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT mk.message_id, mk.account_id, r.entry FROM message_receipts r JOIN message_keys mk ON mk.seq = r.seq WHERE r.entry <> ''")
	if err != nil {
		t.Fatalf("query receipts: %v", err)
	}
	defer rows.Close()
	out := make(map[store.ReceiptKey]int)
	for rows.Next() {
		var k store.ReceiptKey
		if err := rows.Scan(&k.MessageID, &k.AccountID, &k.Type); err != nil {
			t.Fatalf("scan: %v", err)
		}
		out[k]++
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("rows: %v", err)
	}
	return out
}

// wantStored fails unless the store holds exactly the receipts in want,
// each once.
func (g *gateway) wantStored(t *testing.T, want []Receipt) {
	t.Helper()
	got := g.storedKeys(t)
	if len(got) != len(want) {
		t.Errorf("store holds %d receipts, want %d", len(got), len(want))
	}
	for _, r := range want {
		k := store.ReceiptKey{MessageID: r.MessageID, AccountID: testAccount, Type: r.Type}
		if n := got[k]; n != 1 {
			t.Errorf("store holds %v %d times, want once", k, n)
		}
	}
	// The store API agrees with the raw rows.
	if len(want) > 0 {
		rs, err := g.store.ListReceipts(context.Background(), testAccount, want[0].MessageID)
		if err != nil || len(rs) == 0 {
			t.Errorf("ListReceipts(%s) = %d receipts, %v", want[0].MessageID, len(rs), err)
		}
	}
}
