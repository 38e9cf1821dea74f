package sim_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
)

// TestInboundCountsAgainstThroughput: Meta counts the messages users send
// to a number against the same throughput as the business's sends
// (reference §3), so after 6 inbound messages a number with a burst of 10
// accepts only 4 sends at that instant; the 5th gets 130429.
func TestInboundCountsAgainstThroughput(t *testing.T) {
	h := start(t, sim.Config{Limits: sim.Limits{Rate: 10, Burst: 10}})
	res, err := h.s.Inbound(num, sim.InboundRequest{Count: 6})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.WAMIDs) != 6 || res.Webhooks != 0 {
		t.Fatalf("inbound result %+v, want 6 wamids and no webhook (no URL)", res)
	}
	accepted := 0
	for i := range 10 {
		if code, _, _ := h.send(num, token, text(fmt.Sprint("1555000", 1000+i), "")); code == 200 {
			accepted++
		}
	}
	if accepted != 4 {
		t.Fatalf("accepted %d of 10 sends after 6 inbound messages within a burst of 10, want 4", accepted)
	}
	st := h.s.Stats().Numbers[num]
	if st.Inbound != 6 || st.OverLimit != 6 || h.s.Stats().Totals.Inbound != 6 {
		t.Fatalf("stats %+v; want inbound 6, over limit 6", st)
	}
	// More inbound than the limit is never refused: the users' messages
	// take the capacity, ours wait.
	if _, err := h.s.Inbound(num, sim.InboundRequest{Count: 20}); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := h.send(num, token, text("15550009999", "")); code != 400 {
		t.Fatalf("send right after an inbound flood: %d, want 400 (130429)", code)
	}
}

// TestInboundWebhook: over the admin API, inbound messages arrive at the
// webhook URL signed, in Meta's inbound shape, one notification each,
// stamped with the simulator's clock.
func TestInboundWebhook(t *testing.T) {
	const secret = "app-secret"
	var mu sync.Mutex
	var hooks []*cloudapi.Webhook
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !cloudapi.VerifySignature(r.Header.Get(cloudapi.SignatureHeader), body, secret) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		hook, err := cloudapi.ParseWebhook(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		hooks = append(hooks, hook)
		mu.Unlock()
	}))
	t.Cleanup(rcv.Close)
	h := start(t, sim.Config{Webhooks: sim.Webhooks{URL: rcv.URL, AppSecret: secret}})

	post := func(id, body string) (int, []byte) {
		t.Helper()
		resp, err := http.Post(h.url+"/sim/numbers/"+id+"/inbound", "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, body := post(num, `{"count":2,"from":"+4915112345678","text":"größer?"}`)
	if code != http.StatusOK {
		t.Fatalf("POST inbound: %d %s", code, body)
	}
	var res sim.InboundResult
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	if res.PhoneNumberID != num || len(res.WAMIDs) != 2 || res.Webhooks != 2 {
		t.Fatalf("inbound result %+v, want 2 wamids and 2 webhooks for %s", res, num)
	}
	// The simulator counts a post once it has the receiver's answer.
	testwait.For(t, "two inbound webhooks answered", 10*time.Second, func() bool { return h.s.Stats().Webhooks.Posts == 2 })
	want := strconv.FormatInt(h.clk.Now().Unix(), 10)
	seen := map[string]bool{}
	mu.Lock()
	defer mu.Unlock()
	if len(hooks) != 2 {
		t.Fatalf("the receiver got %d notifications, want 2", len(hooks))
	}
	for _, hook := range hooks {
		if len(hook.Entry) != 1 || len(hook.Entry[0].Changes) != 1 {
			t.Fatalf("inbound notification %+v, want one entry with one change", hook)
		}
		c := hook.Entry[0].Changes[0]
		v := c.Value
		if c.Field != cloudapi.FieldMessages || v.Metadata.PhoneNumberID != num || len(v.Messages) != 1 || len(v.Contacts) != 1 || len(v.Statuses) != 0 {
			t.Fatalf("inbound change %+v", c)
		}
		m := v.Messages[0]
		if m.From != "4915112345678" || v.Contacts[0].WaID != m.From || m.Type != "text" || m.Text == nil || m.Text.Body != "größer?" || m.Timestamp != want {
			t.Fatalf("inbound message %+v (contact %+v); want from 4915112345678, text größer?, timestamp %s", m, v.Contacts[0], want)
		}
		seen[m.ID] = true
	}
	for _, id := range res.WAMIDs {
		if !seen[id] {
			t.Fatalf("wamid %s was not delivered; got %v", id, seen)
		}
	}
	if st := h.s.Stats(); st.Numbers[num].Inbound != 2 || st.Webhooks.Posts != 2 {
		t.Fatalf("stats: inbound %d, posts %d; want 2, 2", st.Numbers[num].Inbound, st.Webhooks.Posts)
	}

	if code, _ := post(num, ""); code != http.StatusOK {
		t.Fatalf("POST inbound with an empty body (one message): %d", code)
	}
	for _, tc := range []struct {
		id, body string
		want     int
	}{
		{"404404", `{}`, http.StatusNotFound},
		{num, `{"count":1001}`, http.StatusBadRequest},
		{num, `{"from":"not-a-number"}`, http.StatusBadRequest},
		{num, `{"cont":1}`, http.StatusBadRequest},
	} {
		if code, body := post(tc.id, tc.body); code != tc.want {
			t.Errorf("POST /sim/numbers/%s/inbound %s: %d %s, want %d", tc.id, tc.body, code, body, tc.want)
		}
	}
}
