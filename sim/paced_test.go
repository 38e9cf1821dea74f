package sim_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
)

// templateBody is a minimal valid template send.
func templateBody(to, cb string) string {
	m := map[string]any{"messaging_product": "whatsapp", "to": to, "type": "template",
		"template": map[string]any{"name": "order_update", "language": map[string]any{"code": "en_US"}}}
	if cb != "" {
		m["biz_opaque_callback_data"] = cb
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// sendAnswer is the part of a 200 answer pacing changes.
type sendAnswer struct {
	Messages []struct {
		ID            string `json:"id"`
		MessageStatus string `json:"message_status"`
	} `json:"messages"`
}

// sendOK sends body and returns the wamid and message_status of its 200.
func (h *harness) sendOK(id, tok, body string) (wamid, status string) {
	h.t.Helper()
	code, raw, _ := h.send(id, tok, body)
	var a sendAnswer
	if err := json.Unmarshal(raw, &a); code != 200 || err != nil || len(a.Messages) != 1 || a.Messages[0].ID == "" {
		h.t.Fatalf("send: %d %s (%v)", code, raw, err)
	}
	return a.Messages[0].ID, a.Messages[0].MessageStatus
}

// TestPacedTemplateHeld: a paced template is answered
// held_for_quality_assessment (reference §1) and its statuses wait for the
// hold, while a text message sent after it, never paced, is answered
// accepted and gets its statuses at once.
func TestPacedTemplateHeld(t *testing.T) {
	r := newReceiver(t, nil)
	h := start(t, sim.Config{Webhooks: hookConfig(r), Numbers: []sim.Number{
		{PhoneNumberID: num, AccessToken: token, Faults: &sim.Faults{Paced: 1, PacedHold: time.Hour}},
	}})
	tw, tst := h.sendOK(num, token, templateBody("15550001111", "m-tpl"))
	if tst != "held_for_quality_assessment" {
		t.Fatalf("template answered message_status %q, want held_for_quality_assessment", tst)
	}
	xw, xst := h.sendOK(num, token, text("15550002222", "m-txt"))
	if xst != "accepted" {
		t.Fatalf("text answered message_status %q, want accepted (only templates are paced)", xst)
	}
	testwait.For(t, "the text's sent and delivered", 10*time.Second, func() bool { return len(statuses(t, r.all())) == 2 })
	for _, s := range statuses(t, r.all()) {
		if s.ID != xw {
			t.Fatalf("status %s of %s arrived; want only the text's (%s), the template %s being held", s.Status.Status, s.ID, xw, tw)
		}
	}
	// The receiver has a POST's body before the simulator has its answer
	// and stops counting it pending: wait for that.
	testwait.For(t, "only the held template's 2 statuses pending", 10*time.Second, func() bool { return h.s.Stats().Webhooks.Pending == 2 })
	ns := h.s.Stats().Numbers[num]
	if ns.Accepted != 2 || ns.Faults["paced"] != 1 || ns.Faults["paced_dropped"] != 0 || len(ns.Rejected) != 0 {
		t.Fatalf("stats %+v", ns)
	}
	msgs := h.s.Messages(num, "")
	if len(msgs) != 2 || !msgs[0].Paced || msgs[0].PacedDropped || msgs[0].WAMID != tw || msgs[1].Paced {
		t.Fatalf("messages %+v, want the template paced and the text not", msgs)
	}
}

// TestPacedTemplateSentAfterHold: after the hold the paced message's
// statuses come, carrying its callback data, timestamped by the
// simulator's clock at acceptance plus the hold (Meta sends it then).
func TestPacedTemplateSentAfterHold(t *testing.T) {
	r := newReceiver(t, nil)
	wh := hookConfig(r)
	wh.Concurrency = 1 // one POST at a time: arrival order is sending order
	h := start(t, sim.Config{Webhooks: wh, Numbers: []sim.Number{
		{PhoneNumberID: num, AccessToken: token, Faults: &sim.Faults{Paced: 1, PacedHold: time.Second}},
	}})
	accepted := h.clk.Now().Unix()
	wamid, ms := h.sendOK(num, token, templateBody("15550001111", "m-later"))
	if ms != "held_for_quality_assessment" {
		t.Fatalf("message_status %q", ms)
	}
	testwait.For(t, "the paced message's sent and delivered", 10*time.Second, func() bool { return len(statuses(t, r.all())) == 2 })
	want := []string{"sent", "delivered"}
	for i, s := range statuses(t, r.all()) {
		ts := s.Timestamp
		if s.ID != wamid || s.Status.Status != want[i] || s.BizOpaqueCallbackData != "m-later" || ts != strconv.FormatInt(accepted+1, 10) {
			t.Fatalf("status %d: %+v, want %s of %s at %d", i, s, want[i], wamid, accepted+1)
		}
	}
}

// TestPacedTemplateDropped: a paced message may be dropped instead of
// sent. The reference says nothing of a status for that, so none is ever
// queued for it; it stays accepted and counted.
func TestPacedTemplateDropped(t *testing.T) {
	r := newReceiver(t, nil)
	h := start(t, sim.Config{Webhooks: hookConfig(r), Numbers: []sim.Number{
		{PhoneNumberID: num, AccessToken: token, Faults: &sim.Faults{Paced: 1, PacedDrop: 1, PacedHold: time.Millisecond}},
	}})
	if _, ms := h.sendOK(num, token, templateBody("15550001111", "m-drop")); ms != "held_for_quality_assessment" {
		t.Fatalf("message_status %q", ms)
	}
	st := h.s.Stats()
	if st.Webhooks.Pending != 0 || st.Webhooks.Delivered != 0 {
		t.Fatalf("webhooks %+v, want none for a dropped message", st.Webhooks)
	}
	ns := st.Numbers[num]
	if ns.Accepted != 1 || ns.Faults["paced"] != 1 || ns.Faults["paced_dropped"] != 1 {
		t.Fatalf("stats %+v", ns)
	}
	if msgs := h.s.Messages(num, ""); len(msgs) != 1 || !msgs[0].Paced || !msgs[0].PacedDropped {
		t.Fatalf("messages %+v", msgs)
	}
	// A text message afterwards still gets its statuses: the drop is the
	// message's, not the number's.
	xw, _ := h.sendOK(num, token, text("15550002222", ""))
	testwait.For(t, "the text's statuses", 10*time.Second, func() bool { return len(statuses(t, r.all())) == 2 })
	for _, s := range statuses(t, r.all()) {
		if s.ID != xw {
			t.Fatalf("status of %s, want only the text's %s", s.ID, xw)
		}
	}
}

// TestPacedSetOverHTTPAndCounted: the faults endpoint sets pacing; a paced
// send counts against the number's throughput as any accepted one.
func TestPacedSetOverHTTPAndCounted(t *testing.T) {
	h := start(t, sim.Config{Numbers: []sim.Number{{PhoneNumberID: "slow", AccessToken: "t2", Limits: sim.Limits{Rate: 1, Burst: 1}}}})
	put := func(body string) int {
		req, _ := http.NewRequest(http.MethodPut, h.url+"/sim/numbers/slow/faults", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, bad := range []string{`{"paced":1.5}`, `{"paced_drop":-0.1}`, `{"paced_hold":"soon"}`, `{"paced_hold":"-1s"}`} {
		if code := put(bad); code != 400 {
			t.Errorf("PUT %s: %d, want 400", bad, code)
		}
	}
	if code := put(`{"paced":1,"paced_hold":"1h","paced_drop":0}`); code != 200 {
		t.Fatalf("set faults: %d", code)
	}
	if _, ms := h.sendOK("slow", "t2", templateBody("15550001111", "")); ms != "held_for_quality_assessment" {
		t.Fatalf("message_status %q", ms)
	}
	if code, body, _ := h.send("slow", "t2", templateBody("15550003333", "")); code != 400 || !contains(body, `"code":130429`) {
		t.Fatalf("second send: %d %s, want 130429 (the paced one counted)", code, body)
	}
	ns := h.s.Stats().Numbers["slow"]
	if ns.Accepted != 1 || ns.Faults["paced"] != 1 || ns.OverLimit != 1 {
		t.Fatalf("stats %+v", ns)
	}
}
