package sim_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/wamux/wamux/sim"
)

func readBody(wamid string) string {
	return `{"messaging_product":"whatsapp","status":"read","message_id":"` + wamid + `"}`
}

// TestMarkAsRead: "status":"read" on the send endpoint marks a message a
// user sent to the number as read ({"success":true}); any other id, a
// sent message's included, is Meta's code 100. A read is not a send: it
// is neither recorded nor counted as a request, and takes no throughput.
func TestMarkAsRead(t *testing.T) {
	h := start(t, sim.Config{
		Numbers: []sim.Number{{PhoneNumberID: num, AccessToken: token}, {PhoneNumberID: "other", AccessToken: "t2"}},
		Limits:  sim.Limits{Rate: 1, Burst: 1},
	})
	res, err := h.s.Inbound(num, sim.InboundRequest{From: "4915100000001"})
	if err != nil {
		t.Fatal(err)
	}
	inbound := res.WAMIDs[0]
	res, err = h.s.Inbound("other", sim.InboundRequest{})
	if err != nil {
		t.Fatal(err)
	}
	otherInbound := res.WAMIDs[0]
	h.clk.Advance(2e9) // the inbound messages' throughput is repaid
	sent := h.sentWAMID("4915100000001")
	h.clk.Advance(2e9)

	code, body, _ := h.send(num, token, readBody(inbound))
	if code != http.StatusOK || string(body) != `{"success":true}` {
		t.Fatalf("read of an inbound message: %d %s", code, body)
	}
	// Twice is fine, as with Meta: the message stays read.
	if code, body, _ := h.send(num, token, readBody(inbound)); code != http.StatusOK {
		t.Fatalf("second read: %d %s", code, body)
	}
	// Reads took no throughput: a send at a rate of 1/s still goes through.
	if code, body, _ := h.send(num, token, text("15550001111", "")); code != http.StatusOK {
		t.Fatalf("send after two reads: %d %s", code, body)
	}
	for name, b := range map[string]string{
		"unknown wamid":               readBody("wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUFERjg0NDEzNDdFODU3MUMxMAA="),
		"a sent message":              readBody(sent),
		"another number's inbound":    readBody(otherInbound),
		"not a wamid":                 readBody("12345"),
		"no message_id":               `{"messaging_product":"whatsapp","status":"read"}`,
		"status other than read":      `{"messaging_product":"whatsapp","status":"delivered","message_id":"` + inbound + `"}`,
		"messaging_product missing":   `{"status":"read","message_id":"` + inbound + `"}`,
		"messaging_product not whats": `{"messaging_product":"sms","status":"read","message_id":"` + inbound + `"}`,
	} {
		code, body, _ := h.send(num, token, b)
		if code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, code, body)
			continue
		}
		if contains(body, "Invalid parameter") {
			// An id that is not a received message: Meta's shape with
			// error_data.details.
			sameShape(t, name, body, reference(t, "error_131056.json"))
		}
		var e struct {
			Error struct {
				Code int    `json:"code"`
				Type string `json:"type"`
			} `json:"error"`
		}
		if json.Unmarshal(body, &e) != nil || e.Error.Code != 100 || e.Error.Type != "OAuthException" {
			t.Errorf("%s: %s, want code 100", name, body)
		}
	}
	if code, _, _ := h.send(num, "wrong-token", readBody(inbound)); code != http.StatusUnauthorized {
		t.Errorf("read with a wrong token: %d, want 401", code)
	}
	if code, _, _ := h.send("other", "t2", readBody(inbound)); code != http.StatusBadRequest {
		t.Errorf("read of this number's message through another number: %d, want 400", code)
	}
	var st sim.Stats
	h.get("/sim/stats", &st)
	n := st.Numbers[num]
	// Requests are the two sends and the read with a wrong token, refused
	// (190) before its body is looked at, as any request.
	if n.Reads != 2 || n.ReadsRejected != 8 || n.Requests != 3 || n.Rejected[190] != 1 || n.Accepted != 2 || len(h.s.Messages(num, "")) != 2 {
		t.Fatalf("stats: reads %d, rejected %d, requests %d, accepted %d; want 2, 8, 3, 2", n.Reads, n.ReadsRejected, n.Requests, n.Accepted)
	}
	if st.Numbers["other"].ReadsRejected != 1 || st.Totals.Reads != 2 || st.Totals.ReadsRejected != 9 {
		t.Fatalf("other %+v, totals reads %d rejected %d", st.Numbers["other"], st.Totals.Reads, st.Totals.ReadsRejected)
	}
}
