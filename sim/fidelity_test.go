package sim_test

// Audit: deviations of the simulator's webhook side and error answers from
// Meta's Cloud API (shared/reference/cloudapi.md).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
)

// byMessage groups the statuses received so far by wamid, in arrival order.
func byMessage(t *testing.T, r *receiver) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, s := range statuses(t, r.all()) {
		out[s.ID] = append(out[s.ID], s.Status.Status)
	}
	return out
}

// Reference §6 ("delivered skipped? Yes", ✅ [S5]): when a message is
// delivered and read at the same time Meta sends read without delivered.
// A gateway whose state machine needs delivered before accepting read must
// not pass against the simulator.
func TestReadCanSkipDelivered(t *testing.T) {
	r := newReceiver(t, nil)
	wh := hookConfig(r)
	wh.ReadProbability = 1
	wh.SkipDeliveredProbability = 0.5
	h := start(t, sim.Config{Webhooks: wh})
	const n = 40
	sendAndSettle(t, h, n, 1000)
	skipped := 0
	for id, kinds := range byMessage(t, r) {
		has := map[string]bool{}
		for _, k := range kinds {
			has[k] = true
		}
		if has["read"] && !has["delivered"] {
			skipped++
			// The read then carries the pricing delivered would have had.
			for _, s := range statuses(t, r.all()) {
				if s.ID == id && s.Status.Status == "read" && s.Pricing == nil {
					t.Fatalf("%s: read without delivered has no pricing", id)
				}
			}
		}
	}
	if skipped == 0 {
		t.Fatalf("none of %d read messages skipped delivered; Meta may skip it (reference §6)", n)
	}
}

// Reference §6: failed is terminal and "a late sent" must not undo it, and
// dedupe is on (wamid, status) plus errors[].code for failed: Meta can send
// sent and then failed for one wamid, in either order, so the sim can too
// (a gateway that lets a late sent overwrite failed must not pass).
func TestFailedCanComeWithSent(t *testing.T) {
	r := newReceiver(t, nil)
	wh := hookConfig(r)
	wh.FailProbability = 1
	wh.FailAfterSentProbability = 1
	h := start(t, sim.Config{Webhooks: wh, Faults: sim.Faults{WebhookReorder: 1}})
	sendAndSettle(t, h, 20, 2000)
	lateSent := 0
	for _, kinds := range byMessage(t, r) {
		if len(kinds) == 2 && kinds[0] == "failed" && kinds[1] == "sent" {
			lateSent++
		}
	}
	if lateSent == 0 {
		t.Fatalf("no message got a sent after its failed: %v", byMessage(t, r))
	}
}

// Reference §5: the signature is over the raw bytes, which Meta sends with
// its own key order ("value" before "field", §4.4 samples) and with
// non-ASCII escaped ("escaped unicode version of the payload", [S18]). If
// the sim's body were encoding/json's rendering of the gateway's own
// cloudapi types, a gateway that parses and re-serialises before checking
// the HMAC would verify every sim webhook; it must not.
func TestSignatureFailsOverReserialisedBody(t *testing.T) {
	r := newReceiver(t, nil)
	wh := hookConfig(r)
	wh.FailProbability = 1
	h := start(t, sim.Config{Webhooks: wh})
	h.send(num, token, text("16505551234", "commande-é-42"))
	testwait.For(t, "webhook", 10*time.Second, func() bool { return len(r.all()) == 1 })
	p := r.all()[0]
	if p.sig != independentSig(p.body) {
		t.Fatal("signature does not verify over the raw body")
	}
	w, err := cloudapi.ParseWebhook(p.body)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(w)
	if independentSig(again) == p.sig {
		t.Fatalf("signature also verifies over the re-serialised body; Meta's bytes would not:\n%s", p.body)
	}
	if bytes.ContainsRune(p.body, 'é') {
		t.Fatalf("non-ASCII sent raw; Meta sends \\u escapes:\n%s", p.body)
	}
}

// Reference §6: Meta retries a POST not answered 200 "until the request
// succeeds, for up to 7 days", not a fixed number of attempts.
func TestRetriesUntil200(t *testing.T) {
	r := newReceiver(t, func(n int) int {
		if n < 12 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	wh := hookConfig(r)
	wh.FailProbability = 1
	wh.RetryMax = time.Millisecond
	h := start(t, sim.Config{Webhooks: wh})
	h.send(num, token, text("15550001111", "m1"))
	testwait.For(t, "settled", 10*time.Second, func() bool { return h.s.Stats().Webhooks.Pending == 0 })
	if st := h.s.Stats().Webhooks; st.Delivered != 1 || st.GaveUp != 0 {
		t.Fatalf("stats %+v: gave up after %d attempts, Meta keeps retrying for 7 days", st, len(r.all()))
	}
}

// Reference §2, the older Meta table with HTTP statuses: code 1 is 400
// (500 is for 3, 131000, 131016, 131045, 131057; 503 for 2). Answering 500
// would hide a gateway that classifies by HTTP status.
func TestCode1IsHTTP400(t *testing.T) {
	h := start(t, sim.Config{Faults: sim.Faults{Codes: map[int]float64{1: 1}}})
	status, body, _ := h.send(num, token, text("15550001111", ""))
	var e struct {
		Error struct {
			Code      *int   `json:"code"`
			Type      string `json:"type"`
			FBTraceID string `json:"fbtrace_id"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code == nil || *e.Error.Code != 1 {
		t.Fatalf("body %s", body)
	}
	if status != http.StatusBadRequest {
		t.Fatalf("code 1 answered HTTP %d, Meta's table says 400: %s", status, body)
	}
}

// The limit codes answer with Meta's HTTP status and error fields.
func TestLimitErrorsShape(t *testing.T) {
	for code, want := range map[int]int{130429: 400, 131056: 400, 131048: 400, 131026: 400, 131047: 400,
		4: 400, 80007: 400, 368: 403, 131031: 403, 190: 401, 131000: 500, 2: 503, 131057: 500, 132001: 404} {
		h := start(t, sim.Config{Faults: sim.Faults{Codes: map[int]float64{code: 1}}})
		status, body, hdr := h.send(num, token, text("15550001111", ""))
		var e struct {
			Error map[string]any `json:"error"`
		}
		json.Unmarshal(body, &e)
		if status != want || e.Error["code"] != float64(code) || e.Error["type"] == nil ||
			e.Error["fbtrace_id"] == nil || e.Error["message"] == nil || hdr.Get("Retry-After") != "" {
			t.Errorf("code %d: HTTP %d (want %d) %s", code, status, want, body)
		}
		if code != 190 && code != 2 && code != 131000 {
			if d, ok := e.Error["error_data"].(map[string]any); !ok || d["details"] == nil || d["messaging_product"] != "whatsapp" {
				t.Errorf("code %d: error_data %s", code, body)
			}
		}
	}
}

// sendAndSettle sends n texts to distinct recipients (numbered from first)
// and waits until every status they cause has been delivered.
func sendAndSettle(t *testing.T, h *harness, n, first int) {
	t.Helper()
	for i := range n {
		h.send(num, token, text(fmt.Sprint("1555000", first+i), fmt.Sprint("m", i)))
	}
	testwait.For(t, "all statuses", 10*time.Second, func() bool {
		st := h.s.Stats().Webhooks
		return st.Pending == 0 && st.Delivered > 0
	})
}

// Graph checks the access token before it looks the object up: a token no
// number accepts is 190 (HTTP 401) whatever the phone_number_id, and only
// a valid token on an id it cannot reach gets 100/33. A gateway whose
// token and phone_number_id are both wrong must see the auth failure.
func TestBadTokenOnUnknownNumberIs190(t *testing.T) {
	h := start(t, sim.Config{})
	if code, body, _ := h.send("999", "not-a-token", text("15550001111", "")); code != 401 || !contains(body, `"code":190`) {
		t.Fatalf("bad token, unknown number: %d %s", code, body)
	}
	if code, body, _ := h.send("999", token, text("15550001111", "")); code != 400 || !contains(body, `"error_subcode":33`) {
		t.Fatalf("valid token, unknown number: %d %s", code, body)
	}
	if got := h.s.Stats().UnknownNumber; got != 2 {
		t.Fatalf("unknown_number %d, want 2", got)
	}
}

// Reference §6: Meta retries "on any non-200 response", and a redirect is
// one. The sim's HTTP client must not follow it: were a receiver answering
// 307 (or 302 to a page answering 200) counted as delivered, a gateway
// behind a misconfigured proxy would pass against the sim while Meta kept
// redelivering, and the signed body would go to a URL nobody configured.
func TestWebhookRedirectIsNotDelivered(t *testing.T) {
	var mu sync.Mutex
	var hookPosts, elsewhere int
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		mu.Lock()
		n := hookPosts
		hookPosts++
		mu.Unlock()
		if n == 0 {
			http.Redirect(w, req, "/elsewhere", http.StatusTemporaryRedirect)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		mu.Lock()
		elsewhere++
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	wh := sim.Webhooks{URL: ts.URL + "/hook", AppSecret: appSecret, RetryBase: time.Millisecond, FailProbability: 1}
	h := start(t, sim.Config{Webhooks: wh})
	h.send(num, token, text("15550001111", "m1"))
	testwait.For(t, "settled", 10*time.Second, func() bool { return h.s.Stats().Webhooks.Pending == 0 })
	mu.Lock()
	defer mu.Unlock()
	st := h.s.Stats().Webhooks
	if elsewhere != 0 || hookPosts != 2 || st.PostFailures != 1 || st.Delivered != 1 {
		t.Fatalf("redirect followed: %d POSTs to the hook, %d to the redirect target, stats %+v; "+
			"Meta retries any non-200 answer", hookPosts, elsewhere, st)
	}
}

// Reference §6: Meta retries when the receiver does not answer in time
// or the delivery fails, not only on a non-200 status; the same bytes
// come again, so the receiver may see a duplicate of what it had
// already half-processed.
func TestWebhookRetriedAfterTimeoutAndDrop(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		mu.Lock()
		n := len(bodies)
		bodies = append(bodies, b)
		mu.Unlock()
		switch n {
		case 0: // never answers: the sim's timeout ends the attempt
			<-req.Context().Done()
		case 1: // drops the connection without an answer
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	t.Cleanup(ts.Close)
	wh := sim.Webhooks{URL: ts.URL, AppSecret: appSecret, RetryBase: time.Millisecond, FailProbability: 1,
		Timeout: 50 * time.Millisecond}
	h := start(t, sim.Config{Webhooks: wh})
	h.send(num, token, text("15550001111", "m1"))
	testwait.For(t, "settled", 10*time.Second, func() bool { return h.s.Stats().Webhooks.Pending == 0 })
	mu.Lock()
	defer mu.Unlock()
	st := h.s.Stats().Webhooks
	if len(bodies) != 3 || st.PostFailures != 2 || st.Delivered != 1 || st.GaveUp != 0 {
		t.Fatalf("%d attempts, stats %+v; want a timeout, a drop, then 200", len(bodies), st)
	}
	if !bytes.Equal(bodies[0], bodies[2]) || !bytes.Equal(bodies[1], bodies[2]) {
		t.Fatal("retries are not the same bytes")
	}
}
