package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// customerWrote has customer from write to the gateway's account "acc"
// (number 900100) at t, through the signed webhook.
func (g *gateway) customerWrote(from, wamid string, at time.Time) {
	g.t.Helper()
	body := fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{`+
		`"messaging_product":"whatsapp","metadata":{"display_phone_number":"1","phone_number_id":"900100"},`+
		`"contacts":[{"profile":{"name":"C"},"wa_id":%q}],`+
		`"messages":[{"from":%q,"id":%q,"timestamp":"%d","type":"text","text":{"body":"hi"}}]}}]}]}`, from, from, wamid, at.Unix())
	if err := g.h.PostWebhook(context.Background(), []byte(body)); err != nil {
		g.t.Fatal(err)
	}
}

func textTo(msgID, to, account string) string {
	acc := ""
	if account != "" {
		acc = fmt.Sprintf(`"account_id":%q,`, account)
	}
	return fmt.Sprintf(`{"msg_id":%q,"biz_type":"b",%s"to":%q,"type":"text","text":{"body":"hello"}}`, msgID, acc, to)
}

func templateTo(msgID, to string) string {
	return strings.Replace(textTo(msgID, to, "acc"), `"type":"text","text":{"body":"hello"}`,
		`"type":"template","template":{"name":"hello_world","language":{"code":"en_US"}}`, 1)
}

// TestServiceWindow: with service_window enforce, a free-form message to
// a customer whose last stored message is older than 24 h is refused with
// 422 naming the window's end and nothing is stored; inside the window, a
// template, a customer never heard from, and service_window off are
// accepted; the customer's owner account is checked when no account is
// given; a batch refuses only the items outside.
func TestServiceWindow(t *testing.T) {
	g := newGateway(t)
	now := time.Now()
	recent, old := now.Add(-time.Hour).Truncate(time.Second), now.Add(-25*time.Hour).Truncate(time.Second)
	g.customerWrote("15550000001", "wamid.IN1", recent)
	g.customerWrote("15550000002", "wamid.IN2a", old.Add(-time.Hour))
	g.customerWrote("15550000002", "wamid.IN2b", old)
	wantEnd := old.Add(24 * time.Hour).UTC().Format(time.RFC3339)

	if code, out := g.call("POST", "/v1/messages", textTo("in-window", "15550000001", "acc")); code != http.StatusAccepted {
		t.Fatalf("inside the window: %d %v", code, out)
	}
	code, out := g.call("POST", "/v1/messages", textTo("outside", "15550000002", "acc"))
	msg, _ := out["error"].(map[string]any)["message"].(string)
	if code != http.StatusUnprocessableEntity || errCode(out) != "outside_service_window" || !strings.Contains(msg, wantEnd) {
		t.Fatalf("outside the window: %d %v, want 422 outside_service_window naming %s", code, out, wantEnd)
	}
	if code, out := g.call("GET", "/v1/messages/outside", ""); code != http.StatusNotFound {
		t.Fatalf("a refused message was stored: %d %v", code, out)
	}
	if code, out := g.call("POST", "/v1/messages", templateTo("template", "15550000002")); code != http.StatusAccepted {
		t.Fatalf("a template outside the window: %d %v", code, out)
	}
	if code, out := g.call("POST", "/v1/messages", textTo("stranger", "15550000003", "acc")); code != http.StatusAccepted {
		t.Fatalf("a customer with no stored message: %d %v", code, out)
	}
	// A routed template makes acc (the only account) the owner of
	// 15550000004: without account_id the owner's window applies.
	g.customerWrote("15550000004", "wamid.IN4", old)
	routedTemplate := strings.Replace(templateTo("routed-template", "15550000004"), `"account_id":"acc",`, "", 1)
	if code, out := g.call("POST", "/v1/messages", routedTemplate); code != http.StatusAccepted || out["account_id"] != "acc" {
		t.Fatalf("a routed template: %d %v", code, out)
	}
	if code, out := g.call("POST", "/v1/messages", textTo("routed-outside", "15550000004", "")); code != http.StatusUnprocessableEntity ||
		errCode(out) != "outside_service_window" {
		t.Fatalf("routed to the owner, outside the window: %d %v", code, out)
	}

	code, out = g.call("POST", "/v1/messages:batch", `{"messages":[`+textTo("b-in", "15550000001", "acc")+`,`+
		textTo("b-out", "15550000002", "acc")+`,`+templateTo("b-tpl", "15550000002")+`,`+textTo("b-out2", "15550000002", "acc")+`]}`)
	if code != http.StatusOK {
		t.Fatalf("batch: %d %v", code, out)
	}
	res := out["results"].([]any)
	item := func(i int) map[string]any { return res[i].(map[string]any) }
	if item(0)["msg_id"] != "b-in" || item(2)["msg_id"] != "b-tpl" {
		t.Errorf("batch items inside the window or templates: %v %v", item(0), item(2))
	}
	for _, i := range []int{1, 3} {
		if errCode(item(i)) != "outside_service_window" {
			t.Errorf("batch item %d: %v, want outside_service_window", i, item(i))
		}
	}
	if code, _ := g.call("GET", "/v1/messages/b-out", ""); code != http.StatusNotFound {
		t.Errorf("a refused batch item was stored: %d", code)
	}

	if code, out := g.call("PATCH", "/v1/config", `{"service_window":"off"}`); code != http.StatusOK {
		t.Fatalf("service_window off: %d %v", code, out)
	}
	if code, out := g.call("POST", "/v1/messages", textTo("off", "15550000002", "acc")); code != http.StatusAccepted {
		t.Fatalf("outside the window with the check off: %d %v", code, out)
	}
}
