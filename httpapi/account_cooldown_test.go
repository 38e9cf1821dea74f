package httpapi_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/internal/testwait"
)

// TestPatchCooldownPausesUntilItEnds: an operator's PATCH state=cooldown
// says when it ends (cooldown_until, in the future); the account sends
// nothing until then and is active again afterwards by itself, like a
// cooldown the gateway sets. A cooldown without an end, or with an end in
// the past, would leave the account showing "cooldown" for good, and one
// ending more than 30 days ahead is a disabled account: 400.
func TestPatchCooldownPausesUntilItEnds(t *testing.T) {
	g := newGateway(t)
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
	for _, body := range []string{
		`{"state":"cooldown"}`,
		`{"state":"cooldown","cooldown_until":"` + past + `"}`,
		`{"state":"cooldown","cooldown_until":"9999-12-31T00:00:00Z"}`,
		`{"state":"cooldown","cooldown_until":"` + time.Now().Add(httpapi.MaxOperatorCooldown+time.Hour).UTC().Format(time.RFC3339Nano) + `"}`,
		`{"cooldown_until":"` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano) + `"}`,
		`{"state":"active","cooldown_until":"` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano) + `"}`,
	} {
		if code, out := g.call("PATCH", "/v1/accounts/acc", body); code != 400 || errCode(out) != "invalid" {
			t.Fatalf("PATCH %s = %d %v, want 400 invalid", body, code, out)
		}
		if _, a := g.call("GET", "/v1/accounts/acc", ""); a["state"] != "active" {
			t.Fatalf("after the refused PATCH %s the account is %v, want active", body, a["state"])
		}
	}

	until := time.Now().Add(2 * time.Second).UTC().Truncate(time.Millisecond) // what the store keeps
	code, a := g.call("PATCH", "/v1/accounts/acc", `{"state":"cooldown","cooldown_until":"`+until.Format(time.RFC3339Nano)+`"}`)
	if code != 200 || a["state"] != "cooldown" || a["tokens"] != 0.0 {
		t.Fatalf("PATCH state=cooldown until %v = %d %v, want 200, in cooldown, no tokens (the limiter holds the account)", until, code, a)
	}
	if got, _ := time.Parse(time.RFC3339Nano, a["cooldown_until"].(string)); !got.Equal(until) {
		t.Fatalf("cooldown_until = %v, want %v", a["cooldown_until"], until)
	}
	code, out := g.call("POST", "/v1/messages", `{"biz_type":"t","account_id":"acc","to":"15551239999","type":"text","text":{"body":"later"}}`)
	if code != 202 {
		t.Fatalf("submit = %d %v", code, out)
	}
	id := out["msg_id"].(string)
	// Whatever the simulator saw before the account was seen still cooling
	// down was sent during the cooldown: it must be nothing.
	sent := len(g.h.Sim.Messages("900100", ""))
	if _, a := g.call("GET", "/v1/accounts/acc", ""); a["state"] == "cooldown" && sent != 0 {
		t.Fatalf("%d messages sent during the operator's cooldown", sent)
	}
	testwait.For(t, "the account active again after its cooldown", 20*time.Second, func() bool {
		_, a := g.call("GET", "/v1/accounts/acc", "")
		return a["state"] == "active"
	})
	testwait.For(t, "the message sent after the cooldown", 20*time.Second, func() bool {
		_, m := g.call("GET", "/v1/messages/"+id, "")
		switch m["status"] {
		case "accepted", "sent", "delivered", "read":
			return true
		}
		return false
	})
	if n := len(g.h.Sim.Messages("900100", "")); n != 1 {
		t.Fatalf("the simulator got %d messages, want 1", n)
	}
}

// TestPatchCooldownShownFromTheStore: without a send pipeline to ask, the
// account view still shows a stored cooldown that has not ended as
// "cooldown", with its end.
func TestPatchCooldownShownFromTheStore(t *testing.T) {
	b := newBundle(t)
	if r := b.json(t, "POST", "/v1/accounts", validAccount); r.status != 201 {
		t.Fatalf("create = %d %s", r.status, r.body)
	}
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	if r := b.json(t, "PATCH", "/v1/accounts/acme-1", `{"state":"cooldown","cooldown_until":"`+until.Format(time.RFC3339Nano)+`"}`); r.status != 200 {
		t.Fatalf("PATCH state=cooldown = %d %s", r.status, r.body)
	}
	r := b.json(t, "GET", "/v1/accounts/acme-1", "")
	var got struct {
		State         string    `json:"state"`
		CooldownUntil time.Time `json:"cooldown_until"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	if got.State != "cooldown" || !got.CooldownUntil.Equal(until) {
		t.Fatalf("GET after PATCH state=cooldown = %s, want cooldown until %v", r.body, until)
	}
}

// TestPatchActiveEndsCooldownAndRateKeepsIt: a PATCH that changes only the
// rate leaves a running cooldown alone (the account stays paused, its end
// unchanged); PATCH state=active ends it at once, and the message waiting
// for it goes out. The send pipeline cannot tell the two apart from the
// stored account (a cooldown the gateway has just started may not be
// stored yet), so the API says which one it is.
func TestPatchActiveEndsCooldownAndRateKeepsIt(t *testing.T) {
	g := newGateway(t)
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	if code, a := g.call("PATCH", "/v1/accounts/acc", `{"state":"cooldown","cooldown_until":"`+until.Format(time.RFC3339Nano)+`"}`); code != 200 || a["state"] != "cooldown" {
		t.Fatalf("PATCH state=cooldown = %d %v", code, a)
	}
	code, out := g.call("POST", "/v1/messages", `{"biz_type":"t","account_id":"acc","to":"15551238888","type":"text","text":{"body":"after the pause"}}`)
	if code != 202 {
		t.Fatalf("submit = %d %v", code, out)
	}
	id := out["msg_id"].(string)

	code, a := g.call("PATCH", "/v1/accounts/acc", `{"rate_per_sec":50}`)
	if code != 200 || a["state"] != "cooldown" || a["rate_per_sec"] != 50.0 {
		t.Fatalf("PATCH rate_per_sec = %d %v, want 200, rate 50, still in cooldown", code, a)
	}
	if got, _ := time.Parse(time.RFC3339Nano, a["cooldown_until"].(string)); !got.Equal(until) {
		t.Fatalf("cooldown_until after a rate-only PATCH = %v, want %v", a["cooldown_until"], until)
	}
	if n := len(g.h.Sim.Messages("900100", "")); n != 0 {
		t.Fatalf("%d messages sent during the cooldown", n)
	}

	if code, a := g.call("PATCH", "/v1/accounts/acc", `{"state":"active"}`); code != 200 || a["state"] != "active" || a["cooldown_until"] != nil {
		t.Fatalf("PATCH state=active = %d %v, want 200, active, no cooldown_until", code, a)
	}
	testwait.For(t, "the waiting message sent once the cooldown is ended", 20*time.Second, func() bool {
		_, m := g.call("GET", "/v1/messages/"+id, "")
		switch m["status"] {
		case "accepted", "sent", "delivered", "read":
			return true
		}
		return false
	})
}
