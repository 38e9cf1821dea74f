package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/bench"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
)

// gateway is the whole app with a simulator, driven over HTTP.
type gateway struct {
	t *testing.T
	h *bench.Harness
}

func newGateway(t *testing.T) *gateway {
	t.Helper()
	h, err := bench.Start(context.Background(), bench.HarnessConfig{DataDir: t.TempDir(),
		Settings: map[string]any{"pair_interval": "1ms", "pair_burst": 100}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	if err := h.AddAccount(context.Background(), "acc", "900100", 100, 10, sim.Limits{Rate: 1000}); err != nil {
		t.Fatal(err)
	}
	return &gateway{t: t, h: h}
}

func (g *gateway) call(method, path, body string) (int, map[string]any) {
	g.t.Helper()
	req, _ := http.NewRequest(method, g.h.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+g.h.APIKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		g.t.Fatalf("%s %s: not JSON: %s", method, path, raw)
	}
	return res.StatusCode, out
}

func errCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func TestSubmitIdempotencyAndStatus(t *testing.T) {
	g := newGateway(t)
	body := `{"biz_type":"order","account_id":"acc","client_seq":1,"to":"15551230000","type":"text","text":{"body":"hi"}}`
	code, out := g.call("POST", "/v1/messages", body)
	if code != 202 || out["msg_id"] != wamux.DeriveMsgID("order", "acc", 1) || out["account_id"] != "acc" {
		t.Fatalf("submit = %d %v", code, out)
	}
	id := out["msg_id"].(string)
	// Same request again, with other whitespace: a duplicate.
	code, out = g.call("POST", "/v1/messages", strings.ReplaceAll(body, ":", ": "))
	if code != 200 || out["duplicate"] != true || out["msg_id"] != id {
		t.Fatalf("repeat = %d %v", code, out)
	}
	// Same msg_id, other content: a conflict, and nothing changes.
	code, out = g.call("POST", "/v1/messages", strings.Replace(body, `"hi"`, `"bye"`, 1))
	if code != 409 || errCode(out) != "conflict" {
		t.Fatalf("conflicting reuse = %d %v", code, out)
	}
	testwait.For(t, "message accepted", 10*time.Second, func() bool {
		_, m := g.call("GET", "/v1/messages/"+id, "")
		return m["status"] == "accepted"
	})
	_, m := g.call("GET", "/v1/messages/"+id, "")
	for _, f := range []string{"msg_id", "account_id", "to", "client_seq", "priority", "status", "wamid", "attempts", "last_error", "created_at", "updated_at", "receipts"} {
		if _, ok := m[f]; !ok {
			t.Errorf("GET message lacks %q: %v", f, m)
		}
	}
	if m["attempts"] != 1.0 || m["wamid"] == "" || m["client_seq"] != 1.0 || m["priority"] != "P1" {
		t.Fatalf("message view %v", m)
	}
	if sent := g.h.Sim.Messages("900100", ""); len(sent) != 1 || !strings.Contains(string(sent[0].Body), `"hi"`) {
		t.Fatalf("the simulator got %d messages", len(sent))
	}
	if code, out := g.call("GET", "/v1/messages/nope", ""); code != 404 || errCode(out) != "not_found" {
		t.Fatalf("unknown message = %d %v", code, out)
	}
}

func TestSubmitRejectsBadInput(t *testing.T) {
	g := newGateway(t)
	cases := map[string]string{
		"unknown account":       `{"biz_type":"b","account_id":"ghost","to":"15551230000","type":"text","text":{"body":"x"}}`,
		"seq without account":   `{"biz_type":"b","client_seq":1,"to":"15551230000","type":"text","text":{"body":"x"}}`,
		"zero seq":              `{"biz_type":"b","account_id":"acc","client_seq":0,"to":"15551230000","type":"text","text":{"body":"x"}}`,
		"plus in recipient":     `{"biz_type":"b","account_id":"acc","to":"+15551230000","type":"text","text":{"body":"x"}}`,
		"bad priority":          `{"biz_type":"b","account_id":"acc","to":"15551230000","priority":"P9","type":"text","text":{"body":"x"}}`,
		"unknown field":         `{"biz_type":"b","account_id":"acc","to":"15551230000","type":"text","text":{"body":"x"},"urgent":true}`,
		"missing text":          `{"biz_type":"b","account_id":"acc","to":"15551230000","type":"text"}`,
		"seq is not a number":   `{"biz_type":"b","account_id":"acc","client_seq":"1","to":"15551230000","type":"text","text":{"body":"x"}}`,
		"malformed":             `{"biz_type":`,
		"template without name": `{"biz_type":"b","account_id":"acc","to":"15551230000","type":"template","template":{"language":{"code":"en"}}}`,
	}
	for name, body := range cases {
		if code, out := g.call("POST", "/v1/messages", body); code != 400 || errCode(out) != "invalid" {
			t.Errorf("%s: %d %v", name, code, out)
		}
	}
	if n := g.h.Sim.Stats().Totals.Requests; n != 0 {
		t.Fatalf("bad input reached the provider: %d requests", n)
	}
}

func TestSubmitBatchReportsEachItem(t *testing.T) {
	g := newGateway(t)
	body := `{"messages":[
		{"biz_type":"b","account_id":"acc","client_seq":1,"to":"15551230000","type":"text","text":{"body":"one"}},
		{"biz_type":"b","account_id":"acc","client_seq":1,"to":"15551230000","type":"text","text":{"body":"one"}},
		{"biz_type":"b","account_id":"acc","to":"123","type":"text","text":{"body":"bad"}},
		{"biz_type":"b","to":"15551239999","type":"text","text":{"body":"routed"}},
		42
	]}`
	code, out := g.call("POST", "/v1/messages:batch", body)
	if code != 200 {
		t.Fatalf("batch = %d %v", code, out)
	}
	res := out["results"].([]any)
	if len(res) != 5 {
		t.Fatalf("%d results", len(res))
	}
	item := func(i int) map[string]any { return res[i].(map[string]any) }
	if item(0)["status"] != "waiting_seq" && item(0)["status"] != "queued" {
		t.Errorf("item 0: %v", item(0))
	}
	if item(1)["duplicate"] != true {
		t.Errorf("item 1 (a repeat inside the batch): %v", item(1))
	}
	if errCode(item(2)) != "invalid" || errCode(item(4)) != "invalid" {
		t.Errorf("items 2 and 4: %v %v", item(2), item(4))
	}
	if item(3)["account_id"] != "acc" {
		t.Errorf("item 3 was not routed to the only account: %v", item(3))
	}
	for _, bad := range []string{`{"messages":[]}`, `{}`, `{"messages":{}}`} {
		if code, out := g.call("POST", "/v1/messages:batch", bad); code != 400 {
			t.Errorf("%s: %d %v", bad, code, out)
		}
	}
}

func TestConfigPatchValidatesAsAWhole(t *testing.T) {
	g := newGateway(t)
	_, before := g.call("GET", "/v1/config", "")
	for _, bad := range []string{`{"gap_timeout":"1m","max_attempts":0}`, `{"nope":1}`, `{"bloom":"maybe"}`, `{}`, `{"quiet_period":[1]}`} {
		if code, out := g.call("PATCH", "/v1/config", bad); code != 400 || errCode(out) != "invalid" {
			t.Errorf("%s: %d %v", bad, code, out)
		}
	}
	if _, after := g.call("GET", "/v1/config", ""); !equalJSON(before, after) {
		t.Fatalf("a refused change altered the settings: %v → %v", before, after)
	}
	code, out := g.call("PATCH", "/v1/config", `{"gap_timeout":"90s","max_attempts":5,"bloom":false}`)
	s, _ := out["settings"].(map[string]any)
	if code != 200 || s["gap_timeout"] != "1m30s" || s["max_attempts"] != "5" || s["bloom"] != "false" {
		t.Fatalf("patch = %d %v", code, out)
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
