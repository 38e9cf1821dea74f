package cloudapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
)

const (
	testNumber = "106540352242922"
	testToken  = "EAAG-secret-token-123"
)

// fixedClock stops time for the simulator's limiters, so limit tests do
// not depend on how fast the machine is.
func fixedClock() time.Time { return time.Unix(1_750_000_000, 0) }

// startSim runs a simulator over real HTTP for one test.
func startSim(t *testing.T, cfg sim.Config) (*sim.Server, cloudapi.Destination) {
	t.Helper()
	if cfg.Numbers == nil {
		cfg.Numbers = []sim.Number{{PhoneNumberID: testNumber, AccessToken: testToken}}
	}
	if cfg.Clock == nil {
		cfg.Clock = fixedClock
	}
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { s.Close() })
	return s, cloudapi.Destination{BaseURL: ts.URL, PhoneNumberID: testNumber, AccessToken: testToken}
}

func newClient(t *testing.T, cfg cloudapi.Config) *cloudapi.Client {
	t.Helper()
	c, err := cloudapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func textMsg(id, to string) wamux.Message {
	return wamux.Message{ID: id, To: to, Type: "text", Payload: []byte(`{"body":"hi","preview_url":false}`)}
}

func checkNoToken(t *testing.T, r cloudapi.Result) {
	t.Helper()
	if strings.Contains(r.Reason, testToken) || (r.Err != nil && strings.Contains(r.Err.Error(), testToken)) {
		t.Fatalf("token leaked: %q / %v", r.Reason, r.Err)
	}
}

func TestSendAcceptedTemplate(t *testing.T) {
	s, dest := startSim(t, sim.Config{})
	c := newClient(t, cloudapi.Config{})
	msg := wamux.Message{
		ID: "msg-7f3c", To: "15551234567", Type: "template",
		Payload: []byte(`{"name":"order_update","language":{"code":"en_US"},"components":[{"type":"body","parameters":[{"type":"text","text":"Madhav"}]}]}`),
	}
	r := c.Send(context.Background(), dest, msg)
	if r.Outcome != cloudapi.Accepted || r.WAMID == "" || r.MessageStatus != "accepted" {
		t.Fatalf("result %+v", r)
	}
	got := s.Messages(testNumber, "15551234567")
	if len(got) != 1 || got[0].WAMID != r.WAMID || got[0].CallbackData != "msg-7f3c" || got[0].Type != "template" {
		t.Fatalf("sim recorded %+v", got)
	}
	var body struct {
		MessagingProduct string          `json:"messaging_product"`
		RecipientType    string          `json:"recipient_type"`
		Template         json.RawMessage `json:"template"`
	}
	if err := json.Unmarshal(got[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.MessagingProduct != "whatsapp" || body.RecipientType != "individual" || !json.Valid(body.Template) || !strings.Contains(string(body.Template), "order_update") {
		t.Fatalf("body sent %s", got[0].Body)
	}
}

// TestSendPacedTemplate: a template Meta paces is answered
// held_for_quality_assessment; it is accepted all the same (a wamid,
// nothing to retry), and Paced says so. A plain accepted one is not.
func TestSendPacedTemplate(t *testing.T) {
	_, dest := startSim(t, sim.Config{Faults: sim.Faults{Paced: 1}})
	c := newClient(t, cloudapi.Config{})
	tpl := wamux.Message{ID: "msg-paced", To: "15551234567", Type: "template",
		Payload: []byte(`{"name":"order_update","language":{"code":"en_US"}}`)}
	r := c.Send(context.Background(), dest, tpl)
	if r.Outcome != cloudapi.Accepted || r.WAMID == "" || r.MessageStatus != cloudapi.MessageHeld || !r.Paced() || r.Delay != 0 {
		t.Fatalf("paced template: %+v", r)
	}
	// Text is never paced.
	if r := c.Send(context.Background(), dest, textMsg("msg-text", "15551234568")); r.Outcome != cloudapi.Accepted || r.Paced() {
		t.Fatalf("text: %+v", r)
	}
	if (cloudapi.Result{Outcome: cloudapi.Unknown, MessageStatus: cloudapi.MessageHeld}).Paced() {
		t.Fatal("Paced on an outcome other than Accepted")
	}
}

// TestSendClasses drives the simulator into each outcome class and checks
// the classification and the delay the client reports.
func TestSendClasses(t *testing.T) {
	type want struct {
		outcome  cloudapi.Outcome
		delay    time.Duration
		code     int
		accepted int64 // what the sim's ground truth says afterwards
	}
	codeCase := func(code int, w want) (sim.Config, want) {
		return sim.Config{Faults: sim.Faults{Codes: map[int]float64{code: 1}}}, w
	}
	cases := []struct {
		name string
		cfg  sim.Config
		want want
	}{}
	add := func(name string, cfg sim.Config, w want) {
		cases = append(cases, struct {
			name string
			cfg  sim.Config
			want want
		}{name, cfg, w})
	}
	for code, w := range map[int]want{
		4:      {cloudapi.SlowDown, 30 * time.Second, 4, 0},
		80007:  {cloudapi.SlowDown, time.Minute, 80007, 0},
		130429: {cloudapi.SlowDown, time.Second, 130429, 0},
		131056: {cloudapi.PairLimit, time.Second, 131056, 0},
		131048: {cloudapi.Cooldown, 2 * time.Minute, 131048, 0},
		131057: {cloudapi.Cooldown, time.Minute, 131057, 0},
		368:    {cloudapi.Disable, 0, 368, 0},
		131031: {cloudapi.Disable, 0, 131031, 0},
		190:    {cloudapi.Disable, 0, 190, 0},
		0:      {cloudapi.Disable, 0, 0, 0},
		131026: {cloudapi.Permanent, 0, 131026, 0},
		131047: {cloudapi.Permanent, 0, 131047, 0},
		131049: {cloudapi.Permanent, 0, 131049, 0},
		131050: {cloudapi.Permanent, 0, 131050, 0},
		130403: {cloudapi.Permanent, 0, 130403, 0},
		132001: {cloudapi.Permanent, 0, 132001, 0},
		1:      {cloudapi.Unknown, 0, 1, 0},
		2:      {cloudapi.Unknown, 0, 2, 0},
		131000: {cloudapi.Unknown, 0, 131000, 0},
		131016: {cloudapi.Unknown, 0, 131016, 0},
		555555: {cloudapi.Retry, time.Second, 555555, 0},
	} {
		cfg, w := codeCase(code, w)
		add(fmt.Sprintf("code %d", code), cfg, w)
	}
	add("retry-after honoured", sim.Config{Faults: sim.Faults{Codes: map[int]float64{130429: 1}, RetryAfter: 5 * time.Second}},
		want{cloudapi.SlowDown, 5 * time.Second, 130429, 0})
	add("server error", sim.Config{Faults: sim.Faults{ServerError: 1}}, want{cloudapi.Unknown, 0, -2, 0})
	add("reset before accepting", sim.Config{Faults: sim.Faults{Reset: 1}}, want{cloudapi.Unknown, 0, -1, 0})
	add("reset after accepting", sim.Config{Faults: sim.Faults{ResetAfterAccept: 1}}, want{cloudapi.Unknown, 0, -1, 1})
	add("server error after accepting", sim.Config{Faults: sim.Faults{ServerErrorAfterAccept: 1}}, want{cloudapi.Unknown, 0, 131000, 1})

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, dest := startSim(t, tc.cfg)
			c := newClient(t, cloudapi.Config{})
			r := c.Send(context.Background(), dest, textMsg("m1", "15550001111"))
			checkNoToken(t, r)
			if r.Outcome != tc.want.outcome || r.Delay != tc.want.delay {
				t.Fatalf("got %v after %v (%s), want %v after %v", r.Outcome, r.Delay, r.Reason, tc.want.outcome, tc.want.delay)
			}
			if tc.want.code == -2 { // either server error code
				if r.Code != 131000 && r.Code != 2 {
					t.Fatalf("code %d, want 131000 or 2", r.Code)
				}
			} else if r.Code != tc.want.code {
				t.Fatalf("code %d, want %d", r.Code, tc.want.code)
			}
			if got := s.Stats().Numbers[testNumber].Accepted; got != tc.want.accepted {
				t.Fatalf("sim accepted %d, want %d", got, tc.want.accepted)
			}
		})
	}
}

func TestSendThroughputLimit(t *testing.T) {
	s, dest := startSim(t, sim.Config{Limits: sim.Limits{Rate: 2, Burst: 2}})
	c := newClient(t, cloudapi.Config{})
	var outcomes []cloudapi.Outcome
	for i := range 3 {
		r := c.Send(context.Background(), dest, textMsg(fmt.Sprint("m", i), fmt.Sprint("1555000000", i)))
		outcomes = append(outcomes, r.Outcome)
		if i == 2 && (r.Code != 130429 || r.Delay != cloudapi.ThroughputDelay) {
			t.Fatalf("third send: %+v", r)
		}
	}
	if outcomes[0] != cloudapi.Accepted || outcomes[1] != cloudapi.Accepted || outcomes[2] != cloudapi.SlowDown {
		t.Fatalf("outcomes %v", outcomes)
	}
	if st := s.Stats().Numbers[testNumber]; st.OverLimit != 1 || st.Accepted != 2 || st.Rejected[130429] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestSendPairLimitOnlyThatRecipient checks that a pair limit holds back
// one recipient while another goes through at once.
func TestSendPairLimitOnlyThatRecipient(t *testing.T) {
	s, dest := startSim(t, sim.Config{Limits: sim.Limits{PairBurst: 2}})
	c := newClient(t, cloudapi.Config{})
	ctx := context.Background()
	for i := range 2 {
		if r := c.Send(ctx, dest, textMsg(fmt.Sprint("a", i), "15550001111")); r.Outcome != cloudapi.Accepted {
			t.Fatalf("send %d: %+v", i, r)
		}
	}
	r := c.Send(ctx, dest, textMsg("a2", "15550001111"))
	if r.Outcome != cloudapi.PairLimit || r.Code != 131056 || r.Delay != cloudapi.PairBackoff(0) {
		t.Fatalf("third to same recipient: %+v", r)
	}
	if r := c.Send(ctx, dest, textMsg("b0", "15550002222")); r.Outcome != cloudapi.Accepted {
		t.Fatalf("other recipient: %+v", r)
	}
	if st := s.Stats().Numbers[testNumber]; st.PairOverLimit != 1 || st.Accepted != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestSendBadCredentialsAndNumber(t *testing.T) {
	_, dest := startSim(t, sim.Config{})
	c := newClient(t, cloudapi.Config{})
	bad := dest
	bad.AccessToken = "wrong-" + testToken
	r := c.Send(context.Background(), bad, textMsg("m", "15550001111"))
	checkNoToken(t, r)
	if r.Outcome != cloudapi.Disable || r.Code != 190 {
		t.Fatalf("bad token: %+v", r)
	}
	unknown := dest
	unknown.PhoneNumberID = "999"
	r = c.Send(context.Background(), unknown, textMsg("m", "15550001111"))
	if r.Outcome != cloudapi.Disable || r.Code != 100 || r.Subcode != 33 {
		t.Fatalf("unknown number: %+v", r)
	}
}

func TestSendBadParameterIsPermanent(t *testing.T) {
	s, dest := startSim(t, sim.Config{})
	c := newClient(t, cloudapi.Config{})
	msg := wamux.Message{ID: "m", To: "15550001111", Type: "text", Payload: []byte(`{"preview_url":true}`)}
	r := c.Send(context.Background(), dest, msg)
	if r.Outcome != cloudapi.Permanent || r.Code != 100 || !strings.Contains(r.Reason, "text['body']") {
		t.Fatalf("result %+v", r)
	}
	if st := s.Stats().Numbers[testNumber]; st.Rejected[100] != 1 || st.Accepted != 0 {
		t.Fatalf("stats %+v", st)
	}
	// A payload that is not a JSON object never reaches the API.
	msg.Payload = []byte(`"hi"`)
	if r := c.Send(context.Background(), dest, msg); r.Outcome != cloudapi.Permanent {
		t.Fatalf("invalid payload: %+v", r)
	}
	if st := s.Stats().Numbers[testNumber]; st.Requests != 1 {
		t.Fatalf("requests %d, want 1", st.Requests)
	}
}

// TestSendSlowAfterAccept is the ambiguous case: the sim accepts, then
// answers after the client gave up. The client must say Unknown, and the
// ground truth must show the message accepted.
func TestSendSlowAfterAccept(t *testing.T) {
	s, dest := startSim(t, sim.Config{Faults: sim.Faults{SlowAccept: 1, SlowDelay: time.Hour}})
	// Short against the hour the sim waits, long enough that a loaded
	// machine still delivers the request before the client gives up.
	c := newClient(t, cloudapi.Config{Timeout: 2 * time.Second})
	r := c.Send(context.Background(), dest, textMsg("slow-1", "15550001111"))
	checkNoToken(t, r)
	if r.Outcome != cloudapi.Unknown || r.Reason != "timeout" {
		t.Fatalf("result %+v", r)
	}
	got := s.Messages(testNumber, "")
	if len(got) != 1 || got[0].CallbackData != "slow-1" {
		t.Fatalf("sim messages %+v", got)
	}
}

func TestSendConnectRefusedIsRetry(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := newClient(t, cloudapi.Config{})
	r := c.Send(context.Background(), cloudapi.Destination{BaseURL: "http://" + addr, PhoneNumberID: testNumber, AccessToken: testToken}, textMsg("m", "15550001111"))
	checkNoToken(t, r)
	if r.Outcome != cloudapi.Retry || r.Delay != cloudapi.RetryDelay {
		t.Fatalf("result %+v", r)
	}
}

func TestSendCancelledBeforeIsRetry(t *testing.T) {
	s, dest := startSim(t, sim.Config{})
	c := newClient(t, cloudapi.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := c.Send(ctx, dest, textMsg("m", "15550001111")); r.Outcome != cloudapi.Retry {
		t.Fatalf("result %+v", r)
	}
	if st := s.Stats().Numbers[testNumber]; st.Requests != 0 {
		t.Fatalf("requests %d", st.Requests)
	}
}

func TestBody(t *testing.T) {
	b, err := cloudapi.Body(wamux.Message{ID: `id"1`, To: "+1555", Type: "image", Payload: []byte(` {"link":"https://x/y.png"} `)})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if got["biz_opaque_callback_data"] != `id"1` || got["type"] != "image" || got["image"].(map[string]any)["link"] != "https://x/y.png" {
		t.Fatalf("body %s", b)
	}
	for _, m := range []wamux.Message{
		{To: "1", Type: "Text", Payload: []byte(`{}`)},
		{To: "1", Type: "text", Payload: []byte(`[]`)},
		{To: "", Type: "text", Payload: []byte(`{}`)},
		{ID: strings.Repeat("x", 513), To: "1", Type: "text", Payload: []byte(`{}`)},
	} {
		if _, err := cloudapi.Body(m); err == nil {
			t.Errorf("Body(%+v) accepted", m)
		}
	}
}
