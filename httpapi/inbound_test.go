package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
	"github.com/wamux/wamux/store"
)

type inboundPage struct {
	Messages []map[string]json.RawMessage `json:"messages"`
	Next     string                       `json:"next"`
}

func (b *receiptBundle) inboundPage(t *testing.T, query string) inboundPage {
	t.Helper()
	r := b.json(t, http.MethodGet, "/v1/accounts/acc1/inbound"+query, "")
	if r.status != http.StatusOK {
		t.Fatalf("list %s: %d %s", query, r.status, r.body)
	}
	var p inboundPage
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("list %s: %s: %v", query, r.body, err)
	}
	return p
}

// receive has the webhook store items for acc1.
func (b *receiptBundle) receive(t *testing.T, items ...string) {
	t.Helper()
	body := inboundBody(items...)
	if r := b.webhook(t, body, cloudapi.Sign(body, appSecret)); r.status != http.StatusOK {
		t.Fatalf("webhook: %d %s", r.status, r.body)
	}
}

// textFrom is a text message of customer from sent at sec.
func textFrom(id, from string, sec int) string {
	return fmt.Sprintf(`{"from":%q,"id":%q,"timestamp":"%d","type":"text","text":{"body":"hello %s"}}`, from, id, sec, id)
}

// TestListInbound: the list gives the stored event data newest first,
// one customer's with from, in pages joined by next, and refuses bad
// parameters and unknown accounts.
func TestListInbound(t *testing.T) {
	b := newReceiptBundle(t)
	b.receive(t, textFrom("wamid.A1", "111", 1750030100), textFrom("wamid.B1", "222", 1750030200))
	b.receive(t, textFrom("wamid.A2", "111", 1750030300), inboundItem("wamid.A3", "111", "image",
		`{"id":"m1","mime_type":"image/png","sha256":"x=","caption":"look"}`, ""))
	p := b.inboundPage(t, "")
	var got []string
	for _, m := range p.Messages {
		var id string
		_ = json.Unmarshal(m["wamid"], &id)
		got = append(got, id)
	}
	if strings.Join(got, " ") != "wamid.A2 wamid.B1 wamid.A3 wamid.A1" || p.Next != "" {
		t.Fatalf("list %v next %q", got, p.Next)
	}
	if m := p.Messages[2]; !sameJSON(t, m["image"], []byte(`{"id":"m1","mime_type":"image/png","sha256":"x=","caption":"look"}`)) ||
		m["profile_name"] != nil || string(m["from"]) != `"111"` { // the contact is another customer
		t.Fatalf("stored event data %v", m)
	}
	var seen []string
	q := "?from=111&limit=2"
	for range 5 {
		p := b.inboundPage(t, q)
		for _, m := range p.Messages {
			seen = append(seen, string(m["wamid"]))
		}
		if p.Next == "" {
			break
		}
		q = "?from=111&limit=2&after=" + url.QueryEscape(p.Next)
	}
	if strings.Join(seen, " ") != `"wamid.A2" "wamid.A3" "wamid.A1"` {
		t.Fatalf("customer 111's pages: %v", seen)
	}
	for _, bad := range []string{"?limit=0", "?limit=1001", "?limit=x", "?after=nonsense", "?to=111", "?from=1&from=2"} {
		r := b.json(t, http.MethodGet, "/v1/accounts/acc1/inbound"+bad, "")
		if r.status != http.StatusBadRequest || errorOf(t, r) != wamux.EInvalid {
			t.Errorf("%s: %d %s, want 400", bad, r.status, r.body)
		}
	}
	if r := b.json(t, http.MethodGet, "/v1/accounts/nobody/inbound", ""); r.status != http.StatusNotFound {
		t.Errorf("unknown account: %d %s", r.status, r.body)
	}
	if r := b.do(t, http.MethodGet, "/v1/accounts/acc1/inbound", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("without a key: %d", r.status)
	}
}

// TestMarkInboundRead: marking a stored inbound message read calls the
// provider's mark-as-read with the account's number and token; a message
// not stored is 404, the provider's refusal a 502 without the token.
func TestMarkInboundRead(t *testing.T) {
	sm, err := sim.New(sim.Config{Numbers: []sim.Number{{PhoneNumberID: phoneID, AccessToken: testToken}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() })
	ts := httptest.NewServer(sm)
	t.Cleanup(ts.Close)
	client, err := cloudapi.New(cloudapi.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	b, _ := newReceiptServerWith(t, false, func(c *httpapi.Config) { c.ReadMarker = client })
	ctx := context.Background()
	base := ts.URL
	if _, err := b.store.UpdateAccount(ctx, "acc1", store.AccountPatch{BaseURL: &base}); err != nil {
		t.Fatal(err)
	}
	in, err := sm.Inbound(phoneID, sim.InboundRequest{From: "16315551234"})
	if err != nil {
		t.Fatal(err)
	}
	wamid := in.WAMIDs[0]
	b.receive(t, textFrom(wamid, "16315551234", 1750030100), textFrom("wamid.NOT-AT-META", "16315551234", 1750030101))
	read := func(account, id string) response {
		return b.json(t, http.MethodPost, "/v1/accounts/"+account+"/inbound/"+url.PathEscape(id)+"/read", "")
	}
	if r := read("acc1", wamid); r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"success":true}` {
		t.Fatalf("mark read: %d %s", r.status, r.body)
	}
	if got := sm.Stats().Numbers[phoneID].Reads; got != 1 {
		t.Fatalf("the provider marked %d messages read, want 1", got)
	}
	for _, c := range [][2]string{{"acc1", "wamid.NEVER"}, {"nobody", wamid}} {
		if r := read(c[0], c[1]); r.status != http.StatusNotFound || errorOf(t, r) != wamux.ENotFound {
			t.Errorf("read %v: %d %s, want 404", c, r.status, r.body)
		}
	}
	r := read("acc1", "wamid.NOT-AT-META")
	if r.status != http.StatusBadGateway || errorOf(t, r) != wamux.EProvider || !strings.Contains(string(r.body), "100") {
		t.Fatalf("refused by the provider: %d %s, want 502 naming code 100", r.status, r.body)
	}
	wrong := "EAAGwrong" + testToken
	if _, err := b.store.UpdateAccount(ctx, "acc1", store.AccountPatch{AccessToken: &wrong}); err != nil {
		t.Fatal(err)
	}
	r = read("acc1", wamid)
	if r.status != http.StatusBadGateway || strings.Contains(string(r.body), wrong) || strings.Contains(b.logs.String(), wrong) {
		t.Fatalf("with a wrong token: %d %s", r.status, r.body)
	}
}
