package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/receipts"
	"github.com/wamux/wamux/settings"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/sqlite"
)

const (
	appSecret = "webhook-app-secret-0123456789"
	// secondSecret is another Meta app's (or the next one in a rotation).
	secondSecret = "second-app-secret-9876543210"
	verifyToken  = "verify-token-abc"
	phoneID      = "106540352242922"
)

// receiptBundle is a server with the real receipt pipeline on a real
// SQLite store and one account owning phoneID.
type receiptBundle struct {
	*bundle
	pipe *receipts.Pipeline
}

func newReceiptBundle(t *testing.T) *receiptBundle {
	t.Helper()
	b, _ := newReceiptServer(t, false)
	return b
}

// openAccountStore opens a fresh SQLite store holding account acc1 (the
// webhook's phone number) and a debug logger writing JSON into logs.
func openAccountStore(t *testing.T) (*sqlite.Store, *syncBuffer, *slog.Logger) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "wamux.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.CreateAccount(ctx, wamux.Account{ID: "acc1", PhoneNumberID: phoneID, AccessToken: testToken,
		BaseURL: wamux.DefaultBaseURL, RatePerSec: 80, Burst: 80, State: wamux.AccountActive}); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(httpapi.WithRequestIDs(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	return st, logs, log
}

// newReceiptServer starts the bundle, with the runtime settings (the
// store's, wired to the pipeline and /v1/config) when withSettings.
func newReceiptServer(t *testing.T, withSettings bool) (*receiptBundle, *settings.Manager) {
	t.Helper()
	return newReceiptServerWith(t, withSettings, nil)
}

// newReceiptServerWith is newReceiptServer whose API configuration
// configure changes (when not nil) before the server is built.
func newReceiptServerWith(t *testing.T, withSettings bool, configure func(*httpapi.Config)) (*receiptBundle, *settings.Manager) {
	t.Helper()
	ctx := context.Background()
	st, logs, log := openAccountStore(t)
	var set *settings.Manager
	if withSettings {
		var err error
		if set, err = settings.Load(ctx, st, log); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	pipe, err := receipts.New(receipts.Config{Store: st, Registry: reg, Settings: set, Logger: log, BatchWait: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := pipe.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pipe.Stop(context.Background()) })
	cfg := httpapi.Config{Store: st, Registry: reg, APIKeys: []string{testKey}, Logger: log,
		Receipts: pipe, Settings: set, AppSecret: appSecret + ", " + secondSecret, VerifyToken: verifyToken}
	if configure != nil {
		configure(&cfg)
	}
	api, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &receiptBundle{bundle: &bundle{srv: srv, store: st, logs: logs}, pipe: pipe}, set
}

func (b *receiptBundle) webhook(t *testing.T, body []byte, sig string) response {
	t.Helper()
	hdr := []string{"Content-Type", "application/json"}
	if sig != "" {
		hdr = append(hdr, cloudapi.SignatureHeader, sig)
	}
	return b.do(t, http.MethodPost, "/webhook", "", strings.NewReader(string(body)), hdr...)
}

func (b *receiptBundle) flush(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := b.pipe.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// nothingStored fails if any receipt, dead letter or log entry exists.
func (b *receiptBundle) nothingStored(t *testing.T, what string) {
	t.Helper()
	ctx := context.Background()
	logged, err := b.store.ListReceiptLog(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := b.store.ListDeadLetters(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if s := b.pipe.Stats(); len(logged) > 0 || len(dead) > 0 || s.Received > 0 || s.Appended > 0 {
		t.Fatalf("%s stored something: %d logged, %d dead letters, stats %+v", what, len(logged), len(dead), s)
	}
}

type status struct {
	ID, Status, Timestamp, Callback string
	Code                            int
}

// envelope builds a notification for one phone number.
func envelope(phone string, sts ...status) []byte {
	var parts []string
	for _, s := range sts {
		p := fmt.Sprintf(`{"id":%q,"status":%q,"timestamp":%q,"recipient_id":"16505551234"`, s.ID, s.Status, s.Timestamp)
		if s.Callback != "" {
			p += fmt.Sprintf(`,"biz_opaque_callback_data":%q`, s.Callback)
		}
		if s.Code != 0 {
			p += fmt.Sprintf(`,"errors":[{"code":%d,"title":"failed for a reason"}]`, s.Code)
		}
		parts = append(parts, p+`,"pricing":{"billable":true,"pricing_model":"PMP","category":"utility"}}`)
	}
	return []byte(fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{
		"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":%q},
		"statuses":[%s]},"field":"messages"}]}]}`, phone, strings.Join(parts, ",")))
}

// With several app secrets configured, a body signed under any of them
// is taken, and one signed under another secret is not.
func TestWebhookTakesEveryConfiguredSecret(t *testing.T) {
	b := newReceiptBundle(t)
	body := envelope(phoneID, status{ID: "wamid.S2", Status: "sent", Timestamp: "1750030073"})
	if r := b.webhook(t, body, cloudapi.Sign(body, "not-configured")); r.status != http.StatusUnauthorized {
		t.Fatalf("signed under an unknown secret: %d %s, want 401", r.status, r.body)
	}
	b.nothingStored(t, "a body signed under an unknown secret")
	if r := b.webhook(t, body, cloudapi.Sign(body, secondSecret)); r.status != http.StatusOK {
		t.Fatalf("signed under the second secret: %d %s, want 200", r.status, r.body)
	}
}

func TestWebhookVerify(t *testing.T) {
	b := newReceiptBundle(t)
	get := func(q string) response { return b.do(t, http.MethodGet, "/webhook?"+q, "", nil) }
	ok := get("hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=" + verifyToken)
	if ok.status != http.StatusOK || string(ok.body) != "1158201444" {
		t.Fatalf("verify = %d %q, want 200 with the challenge", ok.status, ok.body)
	}
	for name, q := range map[string]string{
		"wrong token":   "hub.mode=subscribe&hub.challenge=1&hub.verify_token=nope",
		"no token":      "hub.mode=subscribe&hub.challenge=1",
		"wrong mode":    "hub.mode=unsubscribe&hub.challenge=1&hub.verify_token=" + verifyToken,
		"no challenge":  "hub.mode=subscribe&hub.verify_token=" + verifyToken,
		"token+suffix":  "hub.mode=subscribe&hub.challenge=1&hub.verify_token=" + verifyToken + "x",
		"token prefix":  "hub.mode=subscribe&hub.challenge=1&hub.verify_token=" + verifyToken[:5],
		"no parameters": "",
	} {
		if r := get(q); r.status != http.StatusForbidden || strings.Contains(string(r.body), verifyToken) {
			t.Errorf("%s: status %d body %s, want 403 without the token", name, r.status, r.body)
		}
	}
}

// TestWebhookRejects: every bad request gets its status and nothing is
// stored — in particular the signature is checked before the body is
// parsed or any phone number is looked up.
func TestWebhookRejects(t *testing.T) {
	good := envelope(phoneID, status{ID: "wamid.1", Status: "sent", Timestamp: "1750030073"})
	sig := cloudapi.Sign(good, appSecret)
	big := append([]byte(`{"object":"whatsapp_business_account","pad":"`), make([]byte, httpapi.MaxBodyWebhook)...)
	for i := 46; i < len(big); i++ {
		big[i] = 'a'
	}
	big = append(big, `"}`...)
	malformed := []byte(`{"object":"whatsapp_business_account","entry":[{`)
	cases := []struct {
		name string
		body []byte
		sig  string
		want int
	}{
		{"missing signature", good, "", http.StatusUnauthorized},
		{"wrong secret", good, cloudapi.Sign(good, "another-secret"), http.StatusUnauthorized},
		{"truncated signature", good, sig[:len(sig)-2], http.StatusUnauthorized},
		{"prefix only", good, "sha256=", http.StatusUnauthorized},
		{"sha1 header value", good, "sha1=" + sig[len("sha256="):], http.StatusUnauthorized},
		{"signature of another body", append([]byte(" "), good...), sig, http.StatusUnauthorized},
		{"not hex", good, "sha256=" + strings.Repeat("zz", 32), http.StatusUnauthorized},
		{"body over the limit", big, cloudapi.Sign(big, appSecret), http.StatusRequestEntityTooLarge},
		{"malformed JSON, signed", malformed, cloudapi.Sign(malformed, appSecret), http.StatusBadRequest},
		{"not an object, signed", []byte(`[1,2]`), cloudapi.Sign([]byte(`[1,2]`), appSecret), http.StatusBadRequest},
		{"other object, signed", []byte(`{"object":"page","entry":[]}`), cloudapi.Sign([]byte(`{"object":"page","entry":[]}`), appSecret), http.StatusBadRequest},
		{"unknown phone number, signed", envelope("999", status{ID: "wamid.2", Status: "sent", Timestamp: "1750030073"}),
			cloudapi.Sign(envelope("999", status{ID: "wamid.2", Status: "sent", Timestamp: "1750030073"}), appSecret), http.StatusNotFound},
	}
	b := newReceiptBundle(t)
	for _, c := range cases {
		r := b.webhook(t, c.body, c.sig)
		if r.status != c.want {
			t.Errorf("%s: status %d (%s), want %d", c.name, r.status, r.body, c.want)
			continue
		}
		errorOf(t, r)
		b.nothingStored(t, c.name)
	}
	if strings.Contains(b.logs.String(), appSecret) {
		t.Fatal("the app secret appeared in the logs")
	}
	// And the good one is accepted.
	if r := b.webhook(t, good, sig); r.status != http.StatusOK {
		t.Fatalf("good webhook: %d %s", r.status, r.body)
	}
}

// TestWebhookStoresWhatItCarries: statuses become merged states (repeats
// and reordering included), poison and unknown numbers are dead-lettered
// with their reason and visible through the API, inbound messages are
// kept and counted, and 200 comes back for all of it.
func TestWebhookStoresWhatItCarries(t *testing.T) {
	b := newReceiptBundle(t)
	ctx := context.Background()
	read := envelope(phoneID,
		status{ID: "wamid.A", Status: "read", Timestamp: "1750030081"},
		status{ID: "wamid.B", Status: "failed", Timestamp: "1750030090", Code: 131049},
		status{ID: "wamid.C", Status: "played", Timestamp: "1750030090"},
		status{ID: "wamid.D", Status: "sent", Timestamp: "yesterday"}, // poison
	)
	earlier := envelope(phoneID,
		status{ID: "wamid.A", Status: "delivered", Timestamp: "1750030075"},
		status{ID: "wamid.A", Status: "sent", Timestamp: "1750030073"},
		status{ID: "wamid.B", Status: "sent", Timestamp: "1750030073"},
	)
	mixed := []byte(fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[
		{"field":"messages","value":{"metadata":{"phone_number_id":%q},
			"contacts":[{"profile":{"name":"Ann"},"wa_id":"16505551234"}],
			"messages":[{"from":"16505551234","id":"wamid.IN1","timestamp":"1750030100","type":"text","text":{"body":"hi"}}],
			"future_field":{"x":1}}},
		{"field":"messages","value":{"metadata":{"phone_number_id":"777"},
			"statuses":[{"id":"wamid.Z","status":"sent","timestamp":"1750030073","recipient_id":"16505551234",
				"biz_opaque_callback_data":"cb-z"}]}},
		{"field":"calls","value":{"metadata":{"phone_number_id":%q},
			"statuses":[{"id":"wamid.CALL","status":"RINGING","timestamp":"1750030100"}]}},
		{"field":"flows","value":{"event":"ENDPOINT_ERROR_RATE","errors":[{"error_type":"TIMEOUT","error_rate":0.5,"error_count":2}]}}]}]}`,
		phoneID, phoneID))
	// Other subscriptions share the callback URL: a notification of only
	// those is taken (200), and nothing is stored.
	flows := []byte(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"flows",
		"value":{"event":"ENDPOINT_ERROR_RATE","errors":[{"error_type":"TIMEOUT","error_rate":0.5,"error_count":2}]}}]}]}`)
	if r := b.webhook(t, flows, cloudapi.Sign(flows, appSecret)); r.status != http.StatusOK {
		t.Fatalf("flows notification: %d %s", r.status, r.body)
	}
	b.nothingStored(t, "a flows notification")
	// The answer counts what was taken.
	wantBodies := []map[string]int{{"inbound": 0, "receipts": 2}, {"inbound": 0, "receipts": 3},
		{"inbound": 0, "receipts": 2}, {"inbound": 1, "receipts": 0}, {"inbound": 1, "receipts": 0}}
	// read and mixed twice: Meta redelivers.
	for i, body := range [][]byte{read, earlier, read, mixed, mixed} {
		r := b.webhook(t, body, cloudapi.Sign(body, appSecret))
		if r.status != http.StatusOK {
			t.Fatalf("webhook %d: %d %s", i, r.status, r.body)
		}
		want, _ := json.Marshal(wantBodies[i])
		if string(r.body) != string(want)+"\n" {
			t.Errorf("webhook %d answered %q, want %q", i, r.body, string(want)+"\n")
		}
	}
	b.flush(t)
	states, err := b.store.GetStates(ctx, []store.StateKey{{AccountID: "acc1", MessageID: "wamid.A"}, {AccountID: "acc1", MessageID: "wamid.B"}})
	if err != nil {
		t.Fatal(err)
	}
	if s := states[store.StateKey{AccountID: "acc1", MessageID: "wamid.A"}]; s.Type != wamux.ReceiptRead {
		t.Errorf("wamid.A state = %+v, want read despite the later delivered and sent", s)
	}
	if s := states[store.StateKey{AccountID: "acc1", MessageID: "wamid.B"}]; s.Type != wamux.ReceiptFailed || s.ErrorCode != 131049 {
		t.Errorf("wamid.B state = %+v, want failed 131049 (final against sent)", s)
	}
	// read came first: the later delivered and sent are weaker and change
	// nothing; the redelivered two statuses are caught by L1.
	if st := b.pipe.Stats(); st.Applied != 2 || st.Ignored != 3 || st.DedupLRU != 2 {
		t.Errorf("stats = %+v, want 2 applied, 3 ignored, 2 caught by L1", st)
	}
	if n, err := b.store.AddInboundMessages(ctx, []store.InboundMessage{{AccountID: "acc1", WAMID: "wamid.IN1", Type: "text"}}); err != nil || n != 0 {
		t.Errorf("inbound wamid.IN1 was not kept (adding it again added %d, %v)", n, err)
	}

	r := b.json(t, http.MethodGet, "/v1/dead-letters?limit=10", "")
	if r.status != http.StatusOK {
		t.Fatalf("dead letters: %d %s", r.status, r.body)
	}
	var dl struct {
		DeadLetters []struct {
			Source, Reason string
			Payload        json.RawMessage
		} `json:"dead_letters"`
	}
	if err := json.Unmarshal(r.body, &dl); err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, d := range dl.DeadLetters {
		reasons = append(reasons, d.Reason)
		if d.Source != "webhook" {
			t.Errorf("dead letter source %q, want webhook", d.Source)
		}
	}
	all := strings.Join(reasons, " | ")
	if len(dl.DeadLetters) != 4 || strings.Count(all, "timestamp") != 2 || strings.Count(all, "no account has phone_number_id 777") != 2 {
		t.Errorf("dead letters = %v, want the bad timestamp and the unknown number, each delivered twice", reasons)
	}
	for _, d := range dl.DeadLetters {
		if !strings.Contains(d.Reason, "777") {
			continue
		}
		// Enough to replay the status once the number has an account; no
		// user's phone number.
		p := string(d.Payload)
		if !strings.Contains(p, `"id":"wamid.Z"`) || !strings.Contains(p, `"status":"sent"`) ||
			!strings.Contains(p, `"timestamp":"1750030073"`) || !strings.Contains(p, "cb-z") || strings.Contains(p, "16505551234") {
			t.Errorf("unknown number's dead letter %s: want the status's id, status, timestamp and callback data, no recipient", p)
		}
	}
	if r := b.json(t, http.MethodGet, "/v1/dead-letters?limit=0", ""); r.status != http.StatusBadRequest {
		t.Errorf("limit=0: %d, want 400", r.status)
	}
	if r := b.do(t, http.MethodGet, "/v1/dead-letters", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("dead letters without a key: %d, want 401", r.status)
	}
	metrics := b.do(t, http.MethodGet, "/metrics", "", nil)
	for _, m := range []string{`wamux_inbound_messages_total{account="acc1"} 1`, `wamux_receipts_received_total{source="webhook"}`,
		`wamux_dead_letters_total{reason="invalid_status",source="webhook"} 2`, `wamux_receipts_dedup_hits_total{layer="lru"} 2`} {
		if !strings.Contains(string(metrics.body), m) {
			t.Errorf("metrics lack %s", m)
		}
	}
	if strings.Contains(string(metrics.body), "16505551234") || strings.Contains(string(metrics.body), "wamid.") {
		t.Error("metrics carry a phone number or a wamid")
	}
}

func TestReceiptsBatch(t *testing.T) {
	b := newReceiptBundle(t)
	post := func(body string) response { return b.json(t, http.MethodPost, "/v1/receipts:batch", body) }
	ok := post(`{"account_id":"acc1","receipts":[
		{"message_id":"wamid.1","type":"sent","event_time":1750030073000,"version":1},
		{"message_id":"wamid.1","type":"read","event_time":1750030080000},
		{"message_id":"wamid.1","type":"sent","event_time":1750030073000}]}`)
	if ok.status != http.StatusOK || strings.TrimSpace(string(ok.body)) != `{"accepted":2,"duplicates":1}` {
		t.Fatalf("batch = %d %s, want 200 accepted 2 duplicates 1", ok.status, ok.body)
	}
	again := post(`{"account_id":"acc1","receipts":[{"message_id":"wamid.1","type":"read","event_time":1750030080000}]}`)
	if strings.TrimSpace(string(again.body)) != `{"accepted":0,"duplicates":1}` {
		t.Fatalf("repeat = %s, want a duplicate", again.body)
	}
	b.flush(t)
	states, err := b.store.GetStates(context.Background(), []store.StateKey{{AccountID: "acc1", MessageID: "wamid.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if s := states[store.StateKey{AccountID: "acc1", MessageID: "wamid.1"}]; s.Type != wamux.ReceiptRead {
		t.Fatalf("state = %+v, want read", s)
	}

	before := b.pipe.Stats().Received
	for name, c := range map[string]struct {
		body string
		want int
	}{
		"unknown account": {`{"account_id":"nope","receipts":[{"message_id":"w","type":"sent","event_time":1750030073000}]}`, 400},
		"no account":      {`{"receipts":[{"message_id":"w","type":"sent","event_time":1750030073000}]}`, 400},
		"no receipts":     {`{"account_id":"acc1","receipts":[]}`, 400},
		"bad type":        {`{"account_id":"acc1","receipts":[{"message_id":"w","type":"sent","event_time":1750030073000},{"message_id":"w","type":"played","event_time":1750030073000}]}`, 400},
		"no event time":   {`{"account_id":"acc1","receipts":[{"message_id":"w","type":"sent"}]}`, 400},
		"no message id":   {`{"account_id":"acc1","receipts":[{"type":"sent","event_time":1750030073000}]}`, 400},
		"version clash":   {`{"account_id":"acc1","receipts":[{"message_id":"w","type":"read","event_time":1750030073000,"version":1}]}`, 400},
		"unknown field":   {`{"account_id":"acc1","receipts":[{"message_id":"w","type":"sent","event_time":1750030073000,"x":1}]}`, 400},
		"malformed":       {`{"account_id":"acc1","receipts":[`, 400},
	} {
		if r := post(c.body); r.status != c.want {
			t.Errorf("%s: %d %s, want %d", name, r.status, r.body, c.want)
		} else {
			errorOf(t, r)
		}
	}
	big := `{"account_id":"acc1","receipts":[{"message_id":"` + strings.Repeat("a", httpapi.MaxBodyBatch) + `","type":"sent","event_time":1750030073000}]}`
	if r := post(big); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("over 8 MiB: %d, want 413", r.status)
	}
	if r := b.do(t, http.MethodPost, "/v1/receipts:batch", "", strings.NewReader(`{}`)); r.status != http.StatusUnauthorized {
		t.Errorf("no key: %d, want 401", r.status)
	}
	if got := b.pipe.Stats().Received; got != before {
		t.Fatalf("rejected batches reached the pipeline: received %d → %d", before, got)
	}
}

// TestLateReceiptsList: the audit table is visible through the API.
func TestLateReceiptsList(t *testing.T) {
	b := newReceiptBundle(t)
	late := store.LateReceipt{Receipt: wamux.Receipt{MessageID: "wamid.L", AccountID: "acc1", Type: wamux.ReceiptDelivered,
		EventTime: time.Unix(1750030000, 0).UTC(), Source: "webhook"}, Reason: receipts.LateReason}
	if err := b.store.AddLateReceipts(context.Background(), []store.LateReceipt{late}); err != nil {
		t.Fatal(err)
	}
	r := b.json(t, http.MethodGet, "/v1/late-receipts?limit=5", "")
	if r.status != http.StatusOK {
		t.Fatalf("late receipts: %d %s", r.status, r.body)
	}
	var got struct {
		LateReceipts []struct {
			MessageID string `json:"message_id"`
			Type      string `json:"type"`
			Reason    string `json:"reason"`
		} `json:"late_receipts"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.LateReceipts) != 1 || got.LateReceipts[0].MessageID != "wamid.L" || got.LateReceipts[0].Reason != receipts.LateReason {
		t.Fatalf("late receipts = %s", r.body)
	}
	if r := b.json(t, http.MethodGet, "/v1/late-receipts?limit=abc", ""); r.status != http.StatusBadRequest {
		t.Fatalf("limit=abc: %d, want 400", r.status)
	}
}
