package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux/app"
	"github.com/wamux/wamux/config"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/webhooksig"
)

// TestStatusEventsReachSubscriber: messages sent through the simulator,
// whose statuses come back by webhook, reach a subscribed endpoint as
// signed message.status events, each message's in version order up to
// read, and the pull feed lists the same events.
func TestStatusEventsReachSubscriber(t *testing.T) {
	const secret = "app-test-secret"
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.APIKeys, cfg.AppSecret = "127.0.0.1:0", t.TempDir(), []string{testKey}, secret
	cfg.EventAllowNetworks = "127.0.0.0/8"
	cfg.ProviderBaseURLs = "http://127.0.0.1" // the simulator, on any port
	a := app.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	s, err := sim.New(sim.Config{Seed: 3, Webhooks: sim.Webhooks{URL: "http://" + a.Addr() + "/webhook", AppSecret: secret,
		ReadProbability: 1}})
	if err != nil {
		t.Fatal(err)
	}
	simURL, err := s.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.AddNumber(sim.Number{PhoneNumberID: "555003", AccessToken: "tok-555003",
		Limits: sim.Limits{Rate: 1000, PairInterval: time.Millisecond, PairBurst: 1000}}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	statuses := map[string][]string{}
	var verifier *webhooksig.Verifier
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if err := verifier.Verify(r.Header, body); err != nil {
			t.Errorf("event signature: %v", err)
		}
		var ev struct {
			Type string `json:"type"`
			Data struct {
				MsgID  string `json:"msg_id"`
				Status string `json:"status"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &ev); err != nil || ev.Type != "message.status" {
			t.Errorf("event %s (%v)", body, err)
		}
		statuses[ev.Data.MsgID] = append(statuses[ev.Data.MsgID], ev.Data.Status)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()

	call(t, a, "POST", "/v1/accounts",
		`{"id":"acc","phone_number_id":"555003","access_token":"tok-555003","base_url":"`+simURL+`","rate_per_sec":100}`)
	var sub struct{ ID, Secret string }
	if err := json.Unmarshal([]byte(call(t, a, "POST", "/v1/subscriptions",
		`{"url":"`+recv.URL+`/events","events":["message.status"]}`)), &sub); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	verifier, err = webhooksig.NewVerifier(sub.Secret)
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	for i := range n {
		call(t, a, "POST", "/v1/messages", fmt.Sprintf(
			`{"msg_id":"m%d","biz_type":"t","account_id":"acc","to":"4917000000%d","type":"text","text":{"body":"hi"}}`, i, i))
	}
	defer func() {
		if t.Failed() {
			t.Logf("statuses: %v; deliveries: %s", statuses, call(t, a, "GET", "/v1/subscriptions/"+sub.ID+"/deliveries", ""))
		}
	}()
	testwait.For(t, "every message read, as events", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		done := 0
		for _, ss := range statuses {
			if len(ss) > 0 && ss[len(ss)-1] == "read" {
				done++
			}
		}
		return done == n
	})
	mu.Lock()
	// Statuses that arrive together merge into one change: the events
	// are a forward subsequence of the lifecycle, from accepted to read.
	rank := map[string]int{"accepted": 1, "sent": 2, "delivered": 3, "read": 4}
	total := 0
	for id, ss := range statuses {
		total += len(ss)
		for i, st := range ss {
			if rank[st] == 0 || (i == 0 && st != "accepted") || (i > 0 && rank[st] <= rank[ss[i-1]]) {
				t.Errorf("%s: events %v, want a forward run from accepted to read", id, ss)
			}
		}
	}
	mu.Unlock()

	var feed struct {
		Events []struct {
			ID, Type string
			Data     map[string]any
		}
		Next string
	}
	if err := json.Unmarshal([]byte(call(t, a, "GET", "/v1/events?limit=1000", "")), &feed); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(feed.Events) != total || feed.Next == "" {
		t.Fatalf("feed lists %d events (next %q), the subscriber got %d", len(feed.Events), feed.Next, total)
	}
	mu.Unlock()
	// A long poll after the last event waits and answers empty.
	start := time.Now()
	body := call(t, a, "GET", "/v1/events?wait=0.2s&after="+feed.Next, "")
	if time.Since(start) < 200*time.Millisecond || !json.Valid([]byte(body)) {
		t.Fatalf("long poll answered after %v: %s", time.Since(start), body)
	}
}
