package sim_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
)

// TestFaultsPerNumber bans one account while another keeps sending, first
// from the configuration, then changed at run time over HTTP.
func TestFaultsPerNumber(t *testing.T) {
	h := start(t, sim.Config{Numbers: []sim.Number{
		{PhoneNumberID: "banned", AccessToken: "t1", Faults: &sim.Faults{Codes: map[int]float64{368: 1}}},
		{PhoneNumberID: "fine", AccessToken: "t2"},
	}})
	if code, body, _ := h.send("banned", "t1", text("15550001111", "")); code != 403 || !contains(body, `"code":368`) {
		t.Fatalf("banned: %d %s", code, body)
	}
	if code, _, _ := h.send("fine", "t2", text("15550001111", "")); code != 200 {
		t.Fatalf("fine: %d", code)
	}

	put := func(id, body string) int {
		req, _ := http.NewRequest(http.MethodPut, h.url+"/sim/numbers/"+id+"/faults", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := put("fine", `{"codes":{"131048":1},"retry_after":"3s"}`); c != 200 {
		t.Fatalf("set faults: %d", c)
	}
	if c := put("banned", `{}`); c != 200 {
		t.Fatalf("clear faults: %d", c)
	}
	if code, body, hdr := h.send("fine", "t2", text("15550002222", "")); code != 400 || !contains(body, `"code":131048`) || hdr.Get("Retry-After") != "3" {
		t.Fatalf("fine after change: %d %s %v", code, body, hdr)
	}
	if code, _, _ := h.send("banned", "t1", text("15550002222", "")); code != 200 {
		t.Fatalf("banned after clearing: %d", code)
	}
	for _, tc := range []struct {
		id, body string
		want     int
	}{{"nope", `{}`, 404}, {"fine", `{"reset":2}`, 400}, {"banned", `{"slow_delay":"soon"}`, 400}, {"fine", `{"bogus":1}`, 400}} {
		if c := put(tc.id, tc.body); c != tc.want {
			t.Errorf("put %s %s: %d, want %d", tc.id, tc.body, c, tc.want)
		}
	}
	if err := h.s.SetFaults("nope", sim.Faults{}); err == nil {
		t.Fatal("SetFaults on an unknown number")
	}
	st := h.s.Stats()
	if st.Numbers["banned"].Rejected[368] != 1 || st.Numbers["fine"].Faults["code_131048"] != 1 {
		t.Fatalf("stats %+v", st.Numbers)
	}
}

// TestServerErrorAfterAccept: the message is accepted (recorded, given a
// wamid, its statuses sent, counted toward the limits) but the answer is
// Meta's 500 "Something went wrong" (code 131000), the ambiguous 5xx of
// reference §7 on the side where the message did go out.
func TestServerErrorAfterAccept(t *testing.T) {
	r := newReceiver(t, nil)
	h := start(t, sim.Config{Webhooks: hookConfig(r), Numbers: []sim.Number{
		{PhoneNumberID: num, AccessToken: token, Faults: &sim.Faults{ServerErrorAfterAccept: 1}},
		{PhoneNumberID: "slow", AccessToken: "t2", Limits: sim.Limits{Rate: 1, Burst: 1}},
	}})
	code, body, hdr := h.send(num, token, text("15550001111", "m-5xx"))
	var got struct {
		Error struct {
			Message   string `json:"message"`
			Type      string `json:"type"`
			Code      int    `json:"code"`
			ErrorData struct {
				MessagingProduct string `json:"messaging_product"`
				Details          string `json:"details"`
			} `json:"error_data"`
			FBTraceID string `json:"fbtrace_id"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	e := got.Error
	if code != 500 || e.Code != 131000 || e.Message != "(#131000) Something went wrong" || e.Type != "OAuthException" ||
		e.ErrorData.MessagingProduct != "whatsapp" || e.FBTraceID == "" || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Fatalf("answer %d %s (%v)", code, body, hdr)
	}
	if contains(body, "wamid.") {
		t.Fatalf("the error answer leaks the wamid: %s", body)
	}
	msgs := h.s.Messages(num, "")
	if len(msgs) != 1 || msgs[0].CallbackData != "m-5xx" || msgs[0].WAMID == "" || msgs[0].Duplicate {
		t.Fatalf("messages %+v, want the one accepted", msgs)
	}
	testwait.For(t, "sent and delivered webhooks", 10*time.Second, func() bool { return len(statuses(t, r.all())) == 2 })
	// Webhooks go out concurrently: their order of arrival is not fixed.
	seen := map[string]bool{}
	for i, s := range statuses(t, r.all()) {
		if s.ID != msgs[0].WAMID || s.BizOpaqueCallbackData != "m-5xx" {
			t.Fatalf("status %d: %+v, want one of %s with its callback data", i, s, msgs[0].WAMID)
		}
		seen[s.Status.Status] = true
	}
	if !seen["sent"] || !seen["delivered"] {
		t.Fatalf("statuses %v, want sent and delivered", seen)
	}
	st := h.s.Stats().Numbers[num]
	if st.Requests != 1 || st.Accepted != 1 || st.Faults["server_error_after_accept"] != 1 || len(st.Rejected) != 0 {
		t.Fatalf("stats %+v", st)
	}

	// Sent again with the same callback data: accepted a second time,
	// hence a duplicate, as a gateway resending blindly would cause.
	if code, _, _ := h.send(num, token, text("15550001111", "m-5xx")); code != 500 {
		t.Fatalf("second send: %d", code)
	}
	if msgs := h.s.Messages(num, ""); len(msgs) != 2 || !msgs[1].Duplicate || h.s.Stats().Numbers[num].Duplicates != 1 {
		t.Fatalf("after the resend: %+v", msgs)
	}

	// Set over HTTP; the accepted message counts toward the throughput
	// limit (one a second here), so the next is over it.
	req, _ := http.NewRequest(http.MethodPut, h.url+"/sim/numbers/slow/faults", strings.NewReader(`{"server_error_after_accept":1}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("set faults: %d", resp.StatusCode)
	}
	if code, _, _ := h.send("slow", "t2", text("15550002222", "")); code != 500 {
		t.Fatalf("slow, first: %d", code)
	}
	if code, body, _ := h.send("slow", "t2", text("15550003333", "")); code != 400 || !contains(body, `"code":130429`) {
		t.Fatalf("slow, second: %d %s, want 130429 (the first counted)", code, body)
	}
	if err := h.s.SetFaults("slow", sim.Faults{ServerErrorAfterAccept: 1.5}); err == nil {
		t.Fatal("probability 1.5 accepted")
	}
}
