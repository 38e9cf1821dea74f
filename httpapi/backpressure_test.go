package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux/bench"
	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store/sqlite"
)

// newSlowGateway has one account that sends one message an hour, and a
// queue bound of 10 per account: P1 and P2 may take 9, P0 all 10.
func newSlowGateway(t *testing.T) *gateway {
	t.Helper()
	h, err := bench.Start(context.Background(), bench.HarnessConfig{DataDir: t.TempDir(),
		Settings: map[string]any{"pair_interval": "1ms", "pair_burst": 100, "queue_max_depth": 10, "queue_max_backlog": "168h"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	if err := h.AddAccount(context.Background(), "slow", "900200", 1.0/3600, 1, sim.Limits{Rate: 1000}); err != nil {
		t.Fatal(err)
	}
	return &gateway{t: t, h: h}
}

func textMsg(id, prio string, i int) string {
	return fmt.Sprintf(`{"msg_id":%q,"biz_type":"bulk","account_id":"slow","to":"1555%07d","priority":%q,"type":"text","text":{"body":"hi"}}`, id, i, prio)
}

func TestSubmitPastQueueBoundIsRefusedWithRetryAfter(t *testing.T) {
	g := newSlowGateway(t)
	refusedAt := -1
	for i := 0; i < 20 && refusedAt < 0; i++ {
		req, _ := http.NewRequest("POST", g.h.URL+"/v1/messages", strings.NewReader(textMsg(fmt.Sprintf("m%02d", i), "P1", i)))
		req.Header.Set("Authorization", "Bearer "+g.h.APIKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		switch res.StatusCode {
		case 202:
		case 429:
			refusedAt = i
			if got := res.Header.Get("Retry-After"); got != "3600" {
				t.Errorf("Retry-After = %q, want 3600 (one message to drain at 1/h)", got)
			}
		default:
			t.Fatalf("submit %d = %d", i, res.StatusCode)
		}
	}
	// 9 fit (one may have left for the provider meanwhile).
	if refusedAt < 9 || refusedAt > 10 {
		t.Fatalf("first refusal at submit %d, want 9 or 10", refusedAt)
	}
	refusedID := fmt.Sprintf("m%02d", refusedAt)
	code, out := g.call("POST", "/v1/messages", textMsg(refusedID, "P1", refusedAt))
	e, _ := out["error"].(map[string]any)
	if code != 429 || errCode(out) != "queue_full" || e["retry_after"] != float64(3600) || e["message"] == "" {
		t.Fatalf("refused body = %d %v", code, out)
	}
	// Nothing refused is stored.
	if code, _ := g.call("GET", "/v1/messages/"+refusedID, ""); code != 404 {
		t.Fatalf("refused message is stored: GET = %d", code)
	}
	// A stored msg_id sent again is a duplicate, never refused.
	if code, out := g.call("POST", "/v1/messages", textMsg("m00", "P1", 0)); code != 200 || out["duplicate"] != true {
		t.Fatalf("resubmit of a stored msg_id = %d %v", code, out)
	}
	// P0 has its reserved share.
	if code, out := g.call("POST", "/v1/messages", textMsg("urgent", "P0", 99)); code != 202 {
		t.Fatalf("P0 past the P1 bound = %d %v", code, out)
	}
}

func TestBatchPastQueueBoundAnswersPerItem(t *testing.T) {
	g := newSlowGateway(t)
	var items []string
	for i := 0; i < 12; i++ {
		items = append(items, textMsg(fmt.Sprintf("b%02d", i), "P1", i))
	}
	items = append(items, textMsg("b-urgent", "P0", 50))
	body := `{"messages":[` + strings.Join(items, ",") + `]}`
	req, _ := http.NewRequest("POST", g.h.URL+"/v1/messages:batch", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+g.h.APIKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Retry-After") == "" {
		t.Fatalf("batch = %d, Retry-After %q", res.StatusCode, res.Header.Get("Retry-After"))
	}
	// The same batch again: the 9 stored are duplicates, the others are
	// refused again (the queue did not drain), the P0 is a duplicate.
	code, out := g.call("POST", "/v1/messages:batch", body)
	if code != 200 {
		t.Fatalf("batch again = %d %v", code, out)
	}
	results := out["results"].([]any)
	dups, refused := 0, 0
	for i, r := range results {
		rm := r.(map[string]any)
		switch {
		case rm["duplicate"] == true:
			dups++
		case errCode(rm) == "queue_full":
			refused++
			if e := rm["error"].(map[string]any); e["retry_after"] == nil {
				t.Errorf("item %d: refused without retry_after: %v", i, rm)
			}
			if c, _ := g.call("GET", fmt.Sprintf("/v1/messages/b%02d", i), ""); c != 404 {
				t.Errorf("refused item %d is stored", i)
			}
		default:
			t.Errorf("item %d = %v", i, rm)
		}
	}
	// 9 P1 fit, 3 are refused; the P0 uses the reserve.
	if dups != 10 || refused != 3 || results[12].(map[string]any)["duplicate"] != true {
		t.Fatalf("duplicates %d, refused %d, results %v", dups, refused, results)
	}
}

func TestAPIKeyOverItsRateGets429(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "wamux.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	log := slog.New(slog.DiscardHandler)
	set, err := settings.Load(ctx, st, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.Update(ctx, map[string]string{"key_rate": "2", "key_burst": "3"}); err != nil {
		t.Fatal(err)
	}
	clock := fakeclock.New()
	api, err := httpapi.New(httpapi.Config{Store: st, Logger: log, Registry: prometheus.NewRegistry(),
		APIKeys: []string{testKey, "another-key-abcdefgh"}, Settings: set, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	b := &bundle{srv: srv, store: st}
	for i := 0; i < 3; i++ {
		if r := b.json(t, "GET", "/v1/accounts", ""); r.status != 200 {
			t.Fatalf("request %d within the burst = %d", i, r.status)
		}
	}
	r := b.json(t, "GET", "/v1/accounts", "")
	if r.status != 429 || errorOf(t, r) != "rate_limited" || r.header.Get("Retry-After") != "1" {
		t.Fatalf("over the burst = %d %q %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	// Another key has its own bucket.
	if r := b.do(t, "GET", "/v1/accounts", "another-key-abcdefgh", nil); r.status != 200 {
		t.Fatalf("other key = %d", r.status)
	}
	// Half a second refills one request at 2/s.
	clock.Advance(500 * time.Millisecond)
	if r := b.json(t, "GET", "/v1/accounts", ""); r.status != 200 {
		t.Fatalf("after the refill = %d %s", r.status, r.body)
	}
	if r := b.json(t, "GET", "/v1/accounts", ""); r.status != 429 {
		t.Fatalf("refill gave more than one request: %d", r.status)
	}
	// A tenth of a millisecond before the next refill the wait is still
	// told in whole seconds, in the text as in the header.
	clock.Advance(500*time.Millisecond - 100*time.Microsecond)
	if r := b.json(t, "GET", "/v1/accounts", ""); r.status != 429 || r.header.Get("Retry-After") != "1" ||
		!strings.Contains(string(r.body), "retry after 1 s") {
		t.Fatalf("just before the refill = %d %q %s", r.status, r.header.Get("Retry-After"), r.body)
	}
}
