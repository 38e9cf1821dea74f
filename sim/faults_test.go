package sim_test

import (
	"net/http"
	"strings"
	"testing"

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
