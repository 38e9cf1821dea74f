package cloudapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
)

// TestMarkReadAtSimulator: an inbound message of the number is marked
// read; a wamid the number never received is Meta's code 100, permanent;
// a wrong token disables, without the token in what is reported.
func TestMarkReadAtSimulator(t *testing.T) {
	s, dest := startSim(t, sim.Config{})
	c := newClient(t, cloudapi.Config{})
	in, err := s.Inbound(testNumber, sim.InboundRequest{From: "16505551234"})
	if err != nil {
		t.Fatal(err)
	}
	r := c.MarkRead(context.Background(), dest, in.WAMIDs[0])
	if r.Outcome != cloudapi.Accepted || r.HTTPStatus != http.StatusOK {
		t.Fatalf("mark read of an inbound message: %+v", r)
	}
	r = c.MarkRead(context.Background(), dest, "wamid.NEVER")
	if r.Outcome != cloudapi.Permanent || r.Code != 100 {
		t.Fatalf("mark read of an unknown wamid: %+v", r)
	}
	bad := dest
	bad.AccessToken = "wrong-" + testToken
	r = c.MarkRead(context.Background(), bad, in.WAMIDs[0])
	checkNoToken(t, r)
	if r.Outcome != cloudapi.Disable || r.Code != 190 {
		t.Fatalf("bad token: %+v", r)
	}
	if r := c.MarkRead(context.Background(), dest, ""); r.Outcome != cloudapi.Permanent {
		t.Fatalf("no wamid: %+v", r)
	}
}

// TestMarkReadRequest: the request is Meta's mark-as-read on the number's
// messages endpoint with the bearer token; a 200 that does not say
// success is not taken for one.
func TestMarkReadRequest(t *testing.T) {
	var got struct {
		path, auth string
		body       map[string]any
	}
	answer := `{"success":true}`
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		got.path, got.auth = r.Method+" "+r.URL.Path, r.Header.Get("Authorization")
		got.body = nil
		_ = json.Unmarshal(raw, &got.body)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(ts.Close)
	c := newClient(t, cloudapi.Config{})
	dest := cloudapi.Destination{BaseURL: ts.URL, PhoneNumberID: testNumber, AccessToken: testToken}
	if r := c.MarkRead(context.Background(), dest, `wamid.A"B`); r.Outcome != cloudapi.Accepted {
		t.Fatalf("success answer: %+v", r)
	}
	if got.path != "POST /"+cloudapi.VersionDefault+"/"+testNumber+"/messages" || got.auth != "Bearer "+testToken {
		t.Fatalf("request %s with %q", got.path, got.auth)
	}
	if len(got.body) != 3 || got.body["messaging_product"] != "whatsapp" || got.body["status"] != "read" || got.body["message_id"] != `wamid.A"B` {
		t.Fatalf("body %v", got.body)
	}
	answer = `{"success":false}`
	if r := c.MarkRead(context.Background(), dest, "wamid.A"); r.Outcome == cloudapi.Accepted {
		t.Fatalf("success false taken as accepted: %+v", r)
	}
}
