package sim_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/wamux/wamux/sim"
)

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }

func TestDuplicatesAndMessagesOrder(t *testing.T) {
	h := start(t, sim.Config{Numbers: []sim.Number{{PhoneNumberID: num, AccessToken: token}, {PhoneNumberID: "other", AccessToken: "t2"}}})
	h.send(num, token, text("15550001111", "m1"))
	h.send(num, token, text("15550002222", "m2"))
	h.send(num, token, text("15550001111", "m1"))    // the same msg_id again
	h.send("other", "t2", text("15550001111", "m2")) // and across numbers
	h.send(num, token, text("15550001111", ""))      // no callback data: never a duplicate

	st := h.s.Stats()
	if st.Numbers[num].Duplicates != 1 || st.Numbers["other"].Duplicates != 1 || st.Totals.Duplicates != 2 || st.Totals.Accepted != 5 {
		t.Fatalf("stats %+v", st)
	}
	var got struct{ Messages []sim.Message }
	h.get("/sim/messages?phone_number_id="+num+"&to=15550001111", &got)
	if len(got.Messages) != 3 || got.Messages[0].CallbackData != "m1" || got.Messages[1].CallbackData != "m1" || !got.Messages[1].Duplicate || got.Messages[2].CallbackData != "" {
		t.Fatalf("messages %+v", got.Messages)
	}
	if !contains(got.Messages[0].Body, `"body":"hi"`) || got.Messages[0].Seq >= got.Messages[1].Seq {
		t.Fatalf("message record %+v", got.Messages[0])
	}
	h.get("/sim/messages", &got)
	if len(got.Messages) != 5 {
		t.Fatalf("all messages: %d", len(got.Messages))
	}
	for i := 1; i < len(got.Messages); i++ {
		if got.Messages[i-1].Seq >= got.Messages[i].Seq {
			t.Fatalf("not in acceptance order: %+v", got.Messages)
		}
	}
}

func TestStatsNeverShowTokens(t *testing.T) {
	h := start(t, sim.Config{})
	h.send(num, "wrong", text("15550001111", ""))
	for _, p := range []string{"/sim/stats", "/sim/numbers", "/sim/messages"} {
		resp, err := http.Get(h.url + p)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		resp.Body.Close()
		if strings.Contains(buf.String(), token) {
			t.Fatalf("%s shows the token: %s", p, buf.String())
		}
	}
	if st := h.s.Stats().Numbers[num]; st.Rejected[190] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestResetAndRegisterNumbers(t *testing.T) {
	h := start(t, sim.Config{Limits: sim.Limits{Rate: 1}})
	h.send(num, token, text("15550001111", "m1"))
	if code, _, _ := h.send(num, token, text("15550001111", "m2")); code != 400 {
		t.Fatalf("limit not hit: %d", code)
	}
	resp, err := http.Post(h.url+"/sim/reset", "application/json", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("reset: %v %v", err, resp)
	}
	resp.Body.Close()
	if st := h.s.Stats().Numbers[num]; st.Requests != 0 || len(h.s.Messages("", "")) != 0 {
		t.Fatalf("after reset: %+v", st)
	}
	// Limiter state is reset too, and m1 is no longer a duplicate.
	if code, _, _ := h.send(num, token, text("15550001111", "m1")); code != 200 {
		t.Fatalf("after reset: %d", code)
	}
	if st := h.s.Stats().Numbers[num]; st.Duplicates != 0 {
		t.Fatalf("duplicates after reset: %+v", st)
	}

	body, _ := json.Marshal(map[string]any{"phone_number_id": "777", "access_token": "t777", "rate": 2, "pair_interval": "1s"})
	resp, err = http.Post(h.url+"/sim/numbers", "application/json", bytes.NewReader(body))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("register: %v %v", err, resp)
	}
	resp.Body.Close()
	if code, _, _ := h.send("777", "t777", text("15550001111", "")); code != 200 {
		t.Fatalf("registered number: %d", code)
	}
	var list struct {
		Numbers []struct {
			PhoneNumberID string         `json:"phone_number_id"`
			Limits        sim.LimitsView `json:"limits"`
		}
	}
	h.get("/sim/numbers", &list)
	if len(list.Numbers) != 2 || list.Numbers[1].PhoneNumberID != "777" || list.Numbers[1].Limits.Rate != 2 || list.Numbers[1].Limits.PairInterval != "1s" {
		t.Fatalf("numbers %+v", list)
	}
	for _, bad := range []string{`{"phone_number_id":"x"}`, `{"phone_number_id":"x","access_token":"t","rate":-1}`, `{"nope":1}`, `[`} {
		resp, err := http.Post(h.url+"/sim/numbers", "application/json", strings.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("register %s: %d", bad, resp.StatusCode)
		}
	}
}

func TestValidationErrors(t *testing.T) {
	h := start(t, sim.Config{})
	cases := []struct{ body, want string }{
		{`{`, "Invalid parameter"},
		{`{"to":"15550001111","type":"text","text":{"body":"x"}}`, "messaging_product is required"},
		{`{"messaging_product":"sms","to":"15550001111","text":{"body":"x"}}`, "must be one of {WHATSAPP}"},
		{`{"messaging_product":"whatsapp","type":"text","text":{"body":"x"}}`, "The parameter to is required"},
		{`{"messaging_product":"whatsapp","to":"abc","text":{"body":"x"}}`, "phone number"},
		{`{"messaging_product":"whatsapp","to":"15550001111","type":"fax","fax":{}}`, "Param type must be one of"},
		{`{"messaging_product":"whatsapp","to":"15550001111","type":"text"}`, "The parameter text is required"},
		{`{"messaging_product":"whatsapp","to":"15550001111","type":"text","text":{"body":""}}`, "text['body'] is required"},
		{`{"messaging_product":"whatsapp","to":"15550001111","text":{"body":"` + strings.Repeat("x", 4097) + `"}}`, "at most 4096"},
		{`{"messaging_product":"whatsapp","to":"15550001111","type":"template","template":{"language":{"code":"en"}}}`, "template['name']"},
		{`{"messaging_product":"whatsapp","to":"15550001111","type":"template","template":{"name":"t"}}`, "template['language']"},
		{`{"messaging_product":"whatsapp","to":"15550001111","type":"image","image":{}}`, "id or a link"},
		{`{"messaging_product":"whatsapp","to":"15550001111","text":{"body":"x"},"biz_opaque_callback_data":"` + strings.Repeat("x", 513) + `"}`, "at most 512"},
	}
	for _, c := range cases {
		code, body, _ := h.send(num, token, c.body)
		if code != 400 || !contains(body, `"code":100`) || !contains(body, c.want) {
			t.Errorf("%.60s: %d %s", c.body, code, body)
		}
	}
	if st := h.s.Stats().Numbers[num]; st.Rejected[100] != int64(len(cases)) || st.Accepted != 0 {
		t.Fatalf("stats %+v", st)
	}
	if code, body, _ := h.send(num, "", text("15550001111", "")); code != 401 || !contains(body, `"code":190`) {
		t.Fatalf("no token: %d %s", code, body)
	}
	if code, body, _ := h.send("nope", token, text("15550001111", "")); code != 400 || !contains(body, `"error_subcode":33`) {
		t.Fatalf("unknown number: %d %s", code, body)
	}
	if got := h.s.Stats().UnknownNumber; got != 1 {
		t.Fatalf("unknown_number %d", got)
	}
}

// Reference §1: biz_opaque_callback_data is a 512 B string (and §8: a
// field limit of 512). The sim counted characters, so 300 "é" (600 bytes)
// passed it while Meta would refuse them; a gateway that measured the
// limit in characters would never have found out.
func TestCallbackDataLimitIsBytes(t *testing.T) {
	h := start(t, sim.Config{})
	send := func(cb string) (int, []byte) {
		t.Helper()
		code, body, _ := h.send(num, token, text("1555000"+strconv.Itoa(len(cb)), cb))
		return code, body
	}
	if code, body := send(strings.Repeat("é", 256)); code != 200 {
		t.Fatalf("512 bytes: %d %s", code, body)
	}
	if code, body := send(strings.Repeat("é", 300)); code != 400 || !contains(body, `"code":100`) || !contains(body, "512") {
		t.Fatalf("300 characters in 600 bytes: %d %s, want code 100", code, body)
	}
	if code, body := send(strings.Repeat("x", 513)); code != 400 || !contains(body, `"code":100`) {
		t.Fatalf("513 bytes: %d %s", code, body)
	}
}
