package sim_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
)

const hookSecret = "sink-secret"

// hookSink is a webhook endpoint that keeps every body whose signature
// verifies, by the wamids of the inbound messages and statuses in it.
type hookSink struct {
	url string
	mu  sync.Mutex
	// inbound and statuses are raw bodies by wamid; statuses keeps every
	// status of a wamid in arrival order.
	inbound  map[string][]byte
	statuses map[string][]cloudapi.Status
	badSig   int
}

func newHookSink(t *testing.T) *hookSink {
	t.Helper()
	rc := &hookSink{inbound: map[string][]byte{}, statuses: map[string][]cloudapi.Status{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !cloudapi.VerifySignature(r.Header.Get(cloudapi.SignatureHeader), body, hookSecret) {
			rc.mu.Lock()
			rc.badSig++
			rc.mu.Unlock()
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var hook struct {
			Entry []struct {
				Changes []struct {
					Value struct {
						Messages []struct {
							ID string `json:"id"`
						} `json:"messages"`
						Statuses []cloudapi.Status `json:"statuses"`
					} `json:"value"`
				} `json:"changes"`
			} `json:"entry"`
		}
		if err := json.Unmarshal(body, &hook); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for _, e := range hook.Entry {
			for _, c := range e.Changes {
				for _, m := range c.Value.Messages {
					rc.inbound[m.ID] = body
				}
				for _, st := range c.Value.Statuses {
					rc.statuses[st.ID] = append(rc.statuses[st.ID], st)
				}
			}
		}
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL
	return rc
}

func (rc *hookSink) body(wamid string) []byte {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.inbound[wamid]
}

func (rc *hookSink) statusesOf(wamid string) []cloudapi.Status {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]cloudapi.Status(nil), rc.statuses[wamid]...)
}

// postJSON posts body to the simulator and returns the status and answer.
func (h *harness) postJSON(path, body string) (int, []byte) {
	h.t.Helper()
	resp, err := http.Post(h.url+path, "application/json", bytes.NewBufferString(body))
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// sentWAMID sends a text to `to` and returns its wamid.
func (h *harness) sentWAMID(to string) string {
	h.t.Helper()
	code, body, _ := h.send(num, token, text(to, ""))
	if code != 200 {
		h.t.Fatalf("send to %s: %d %s", to, code, body)
	}
	var ok struct {
		Messages []struct{ ID string } `json:"messages"`
	}
	if err := json.Unmarshal(body, &ok); err != nil || len(ok.Messages) != 1 {
		h.t.Fatalf("send answer %s", body)
	}
	return ok.Messages[0].ID
}

// inboundOne posts one inbound request over HTTP and returns its wamid.
func (h *harness) inboundOne(req string) string {
	h.t.Helper()
	code, body := h.postJSON("/sim/numbers/"+num+"/inbound", req)
	if code != http.StatusOK {
		h.t.Fatalf("POST inbound %s: %d %s", req, code, body)
	}
	var res sim.InboundResult
	if err := json.Unmarshal(body, &res); err != nil || len(res.WAMIDs) != 1 {
		h.t.Fatalf("inbound result %s", body)
	}
	return res.WAMIDs[0]
}

// TestInboundEveryType: each message type a user can send arrives signed,
// in the shape of Meta's messages webhook reference for that type (the
// samples in testdata/inbound), with the ids, sender, context and
// timestamp of this message; the ground truth counts them by type.
func TestInboundEveryType(t *testing.T) {
	rc := newHookSink(t)
	h := start(t, sim.Config{Webhooks: sim.Webhooks{URL: rc.url, AppSecret: hookSecret}})
	const customer = "4915112345678"
	sent := h.sentWAMID(customer)
	display := h.numberDisplay()

	cases := []struct {
		sample, req string
		typ         string
		reply       bool // carries context of the sent message
		check       func(m map[string]any) (got, want string)
	}{
		{"text", `{"from":"` + customer + `","text":"größer?"}`, "text", false, func(m map[string]any) (string, string) {
			return str(m, "text", "body"), "größer?"
		}},
		{"text_reply", `{"context":"` + sent + `","text":"Yes, please"}`, "text", true, nil},
		{"image", `{"from":"` + customer + `","type":"image","caption":"Seen this?"}`, "image", false, func(m map[string]any) (string, string) {
			return str(m, "image", "caption") + "," + str(m, "image", "mime_type"), "Seen this?,image/jpeg"
		}},
		{"audio", `{"from":"` + customer + `","type":"audio"}`, "audio", false, func(m map[string]any) (string, string) {
			return str(m, "audio", "mime_type"), "audio/ogg; codecs=opus"
		}},
		{"video", `{"from":"` + customer + `","type":"video","caption":"Unboxing"}`, "video", false, nil},
		{"document", `{"from":"` + customer + `","type":"document","caption":"Invoice","filename":"invoice.pdf"}`, "document", false, func(m map[string]any) (string, string) {
			return str(m, "document", "filename"), "invoice.pdf"
		}},
		{"sticker", `{"from":"` + customer + `","type":"sticker"}`, "sticker", false, func(m map[string]any) (string, string) {
			return str(m, "sticker", "mime_type"), "image/webp"
		}},
		{"location", `{"from":"` + customer + `","type":"location","latitude":37.5,"longitude":-122.25,"name":"Philz"}`, "location", false, func(m map[string]any) (string, string) {
			loc := m["location"].(map[string]any)
			return strconv.FormatFloat(loc["latitude"].(float64), 'f', -1, 64) + "," + str(m, "location", "name"), "37.5,Philz"
		}},
		{"contacts", `{"from":"` + customer + `","type":"contacts","name":"Barbara Johnson"}`, "contacts", false, nil},
		{"interactive_button_reply", `{"type":"interactive","context":"` + sent + `","reply_id":"yes","reply_title":"Yes"}`, "interactive", true, func(m map[string]any) (string, string) {
			return str(m, "interactive", "type") + "," + str(m, "interactive", "button_reply", "id"), "button_reply,yes"
		}},
		{"interactive_list_reply", `{"type":"interactive","interactive":"list_reply","context":"` + sent + `","reply_id":"row-2","reply_title":"Express","reply_description":"Tomorrow"}`, "interactive", true, func(m map[string]any) (string, string) {
			return str(m, "interactive", "list_reply", "id") + "," + str(m, "interactive", "list_reply", "description"), "row-2,Tomorrow"
		}},
		{"button", `{"type":"button","context":"` + sent + `","payload":"STOP","reply_title":"Stop"}`, "button", true, func(m map[string]any) (string, string) {
			return str(m, "button", "payload") + "," + str(m, "button", "text"), "STOP,Stop"
		}},
		{"reaction", `{"type":"reaction","context":"` + sent + `","emoji":"❤️"}`, "reaction", false, func(m map[string]any) (string, string) {
			return str(m, "reaction", "message_id") + "," + str(m, "reaction", "emoji"), sent + ",❤️"
		}},
	}
	wantTS := strconv.FormatInt(h.clk.Now().Unix(), 10)
	for _, tc := range cases {
		t.Run(tc.sample, func(t *testing.T) {
			wamid := h.inboundOne(tc.req)
			testwait.For(t, "the inbound webhook of "+tc.sample, 10*time.Second, func() bool { return rc.body(wamid) != nil })
			body := rc.body(wamid)
			sameShape(t, tc.sample, body, readInboundSample(t, tc.sample))
			var hook struct {
				Entry []struct {
					Changes []struct {
						Value struct {
							Metadata cloudapi.Metadata  `json:"metadata"`
							Contacts []cloudapi.Contact `json:"contacts"`
							Messages []map[string]any   `json:"messages"`
						} `json:"value"`
					} `json:"changes"`
				} `json:"entry"`
			}
			if err := json.Unmarshal(body, &hook); err != nil {
				t.Fatal(err)
			}
			v := hook.Entry[0].Changes[0].Value
			m := v.Messages[0]
			if v.Metadata.PhoneNumberID != num || m["id"] != wamid || m["from"] != customer || m["type"] != tc.typ ||
				m["timestamp"] != wantTS || v.Contacts[0].WaID != customer || v.Contacts[0].Profile.Name == "" {
				t.Fatalf("message %v, contact %+v, metadata %+v; want id %s from %s type %s at %s", m, v.Contacts, v.Metadata, wamid, customer, tc.typ, wantTS)
			}
			if tc.reply {
				if str(m, "context", "id") != sent || str(m, "context", "from") != display {
					t.Fatalf("context %v, want id %s from %s", m["context"], sent, display)
				}
			} else if m["context"] != nil {
				t.Fatalf("context %v on a message that replies to nothing", m["context"])
			}
			if tc.check != nil {
				if got, want := tc.check(m); got != want {
					t.Fatalf("content %q, want %q", got, want)
				}
			}
		})
	}
	st := h.s.Stats().Numbers[num]
	want := map[string]int64{"text": 2, "image": 1, "audio": 1, "video": 1, "document": 1, "sticker": 1, "location": 1,
		"contacts": 1, "interactive": 2, "button": 1, "reaction": 1}
	for k, n := range want {
		if st.InboundByType[k] != n {
			t.Errorf("inbound_by_type[%s] = %d, want %d (all: %v)", k, st.InboundByType[k], n, st.InboundByType)
		}
	}
	if st.Inbound != 13 || h.s.Stats().Totals.InboundByType["interactive"] != 2 {
		t.Errorf("inbound %d, totals %v; want 13", st.Inbound, h.s.Stats().Totals.InboundByType)
	}
	if rc.badSig != 0 {
		t.Errorf("%d webhooks failed the signature check", rc.badSig)
	}
}

// TestInboundRefusals: what a user could not have sent is refused with
// the simulator's 400, and nothing is counted.
func TestInboundRefusals(t *testing.T) {
	h := start(t, sim.Config{})
	sent := h.sentWAMID("4915100000001")
	for _, body := range []string{
		`{"type":"fax"}`,
		`{"type":"reaction"}`, // a reaction is always to a message
		`{"type":"interactive","interactive":"nfm_reply","context":"` + sent + `"}`,
		`{"context":"wamid.unknown"}`,
		`{"context":"` + sent + `","from":"4915100000002"}`, // sent to someone else
	} {
		if code, answer := h.postJSON("/sim/numbers/"+num+"/inbound", body); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", body, code, answer)
		}
	}
	if n := h.s.Stats().Numbers[num].Inbound; n != 0 {
		t.Fatalf("refused requests counted %d inbound messages", n)
	}
}

func str(m map[string]any, path ...string) string {
	var v any = m
	for _, k := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = mm[k]
	}
	s, _ := v.(string)
	return s
}

func readInboundSample(t *testing.T, name string) []byte {
	t.Helper()
	return reference(t, "../inbound/"+name+".json")
}

func (h *harness) numberDisplay() string {
	var got struct {
		Numbers []struct {
			PhoneNumberID      string `json:"phone_number_id"`
			DisplayPhoneNumber string `json:"display_phone_number"`
		} `json:"numbers"`
	}
	h.get("/sim/numbers", &got)
	for _, n := range got.Numbers {
		if n.PhoneNumberID == num {
			return n.DisplayPhoneNumber
		}
	}
	h.t.Fatalf("no number %s", num)
	return ""
}
