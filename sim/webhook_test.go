package sim_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
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

const appSecret = "app-secret-xyz"

// receiver is a webhook endpoint that records every POST and answers with
// the status answer(n) for the n-th POST (counting from 0).
type receiver struct {
	mu     sync.Mutex
	posts  []post
	answer func(n int) int
	url    string
}

type post struct {
	body []byte
	sig  string
}

func newReceiver(t *testing.T, answer func(int) int) *receiver {
	r := &receiver{answer: answer}
	if r.answer == nil {
		r.answer = func(int) int { return 200 }
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		n := len(r.posts)
		r.posts = append(r.posts, post{b, req.Header.Get("X-Hub-Signature-256")})
		r.mu.Unlock()
		w.WriteHeader(r.answer(n))
	}))
	t.Cleanup(ts.Close)
	r.url = ts.URL
	return r
}

func (r *receiver) all() []post {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slicesClone(r.posts)
}

func slicesClone(p []post) []post { return append([]post(nil), p...) }

// statuses parses every recorded POST and returns the statuses in
// arrival order, each with its number's id.
func statuses(t *testing.T, posts []post) []numberedStatus {
	t.Helper()
	var out []numberedStatus
	for _, p := range posts {
		w, err := cloudapi.ParseWebhook(p.body)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range w.Entry {
			for _, c := range e.Changes {
				for _, s := range c.Value.Statuses {
					out = append(out, numberedStatus{c.Value.Metadata.PhoneNumberID, e.ID, s})
				}
			}
		}
	}
	return out
}

type numberedStatus struct {
	number, waba string
	cloudapi.Status
}

func hookConfig(r *receiver) sim.Webhooks {
	return sim.Webhooks{URL: r.url, AppSecret: appSecret, Delay: sim.Range{Min: 0, Max: time.Millisecond}, RetryBase: time.Millisecond}
}

// independentSig recomputes the signature without the package under test.
func independentSig(body []byte) string {
	m := hmac.New(sha256.New, []byte(appSecret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func TestWebhooksSignedGoldenInOrder(t *testing.T) {
	r := newReceiver(t, nil)
	wh := hookConfig(r)
	wh.ReadProbability = 1
	wh.Concurrency = 1
	h := start(t, sim.Config{Webhooks: wh})
	_, body, _ := h.send(num, token, string(reference(t, "request_template.json")))
	var ok struct {
		Messages []struct{ ID string } `json:"messages"`
	}
	json.Unmarshal(body, &ok)
	testwait.For(t, "3 webhooks", 10*time.Second, func() bool { return len(r.all()) == 3 })

	posts := r.all()
	want := map[string]bool{}
	for _, name := range []string{"webhook_sent.json", "webhook_delivered_read.json"} {
		maps.Copy(want, shape(t, reference(t, name)))
	}
	for _, p := range posts {
		if p.sig != independentSig(p.body) {
			t.Fatalf("signature %q does not verify for %s", p.sig, p.body)
		}
		// Every path the sim sends is one Meta's samples have.
		if extra := diff(shape(t, p.body), want); len(extra) > 0 {
			t.Fatalf("paths not in the reference: %v\n%s", extra, p.body)
		}
	}
	sts := statuses(t, posts)
	for i, kind := range []string{"sent", "delivered", "read"} {
		s := sts[i]
		if s.Status.Status != kind || s.ID != ok.Messages[0].ID || s.RecipientID != "15551234567" ||
			s.number != num || s.BizOpaqueCallbackData == "" || s.waba == "" {
			t.Fatalf("status %d: %+v", i, s)
		}
		if _, err := strconv.ParseInt(s.Timestamp, 10, 64); err != nil {
			t.Fatalf("timestamp %q", s.Timestamp)
		}
		if (kind == "read") != (s.Pricing == nil) {
			t.Fatalf("pricing on %s: %+v (v24: on sent and delivered only)", kind, s.Pricing)
		}
	}
	// A POST counts as delivered just before it stops counting as pending.
	testwait.For(t, "stats", 10*time.Second, func() bool { w := h.s.Stats().Webhooks; return w.Delivered == 3 && w.Pending == 0 })
	if st := h.s.Stats().Webhooks; st.Posts != 3 || st.Pending != 0 || st.PostFailures != 0 {
		t.Fatalf("webhook stats %+v", st)
	}
}

func TestWebhookFailedGolden(t *testing.T) {
	r := newReceiver(t, nil)
	wh := hookConfig(r)
	wh.FailProbability = 1
	h := start(t, sim.Config{Webhooks: wh})
	h.send(num, token, text("16505551234", "m-fail"))
	testwait.For(t, "failed webhook", 10*time.Second, func() bool { return len(r.all()) == 1 })
	p := r.all()[0]
	// Meta's failed sample, plus the callback data the sim echoes because
	// the send carried some (as in the delivered/read sample).
	got, failed := shape(t, p.body), shape(t, reference(t, "webhook_failed.json"))
	allowed := maps.Clone(failed)
	maps.Copy(allowed, shape(t, reference(t, "webhook_delivered_read.json")))
	if missing, extra := diff(failed, got), diff(got, allowed); len(missing)+len(extra) > 0 {
		t.Fatalf("failed webhook: missing %v, extra %v\n%s", missing, extra, p.body)
	}
	s := statuses(t, []post{p})[0]
	if s.Status.Status != "failed" || s.Errors[0].Code != 131049 || s.BizOpaqueCallbackData != "m-fail" {
		t.Fatalf("failed status %+v", s)
	}
	if p.sig != independentSig(p.body) {
		t.Fatal("bad signature")
	}
}

func TestWebhooksBatchedAcrossNumbers(t *testing.T) {
	r := newReceiver(t, nil)
	wh := hookConfig(r)
	wh.BatchSize = 6
	wh.BatchWait = time.Hour // flush only when full: no timing in the test
	h := start(t, sim.Config{Webhooks: wh, Numbers: []sim.Number{
		{PhoneNumberID: "n1", AccessToken: "t1", WABAID: "w1"},
		{PhoneNumberID: "n2", AccessToken: "t2", WABAID: "w2"},
		{PhoneNumberID: "n3", AccessToken: "t3", WABAID: "w1"},
	}})
	for i := 1; i <= 3; i++ {
		h.send(fmt.Sprint("n", i), fmt.Sprint("t", i), text("15550001111", fmt.Sprint("m", i)))
	}
	testwait.For(t, "one batch", 10*time.Second, func() bool { return len(r.all()) == 1 })
	w, err := cloudapi.ParseWebhook(r.all()[0].body)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Entry) != 2 {
		t.Fatalf("entries %d, want one per WABA", len(w.Entry))
	}
	changes := 0
	for _, e := range w.Entry {
		changes += len(e.Changes)
	}
	if n := len(statuses(t, r.all())); n != 6 || changes != 3 {
		t.Fatalf("statuses %d changes %d, want 6 and 3", n, changes)
	}
}

func TestWebhooksRetriedUntil200(t *testing.T) {
	r := newReceiver(t, func(n int) int {
		if n < 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	wh := hookConfig(r)
	wh.FailProbability = 1 // one status per message
	h := start(t, sim.Config{Webhooks: wh})
	h.send(num, token, text("15550001111", "m1"))
	testwait.For(t, "delivered", 10*time.Second, func() bool { w := h.s.Stats().Webhooks; return w.Delivered == 1 && w.Pending == 0 })
	posts := r.all()
	if len(posts) != 3 || string(posts[0].body) != string(posts[2].body) {
		t.Fatalf("posts %d, want 3 identical", len(posts))
	}
	if st := h.s.Stats().Webhooks; st.PostFailures != 2 || st.Posts != 1 || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestWebhooksGiveUpAfterMaxAttempts(t *testing.T) {
	r := newReceiver(t, func(int) int { return http.StatusAccepted }) // not 200
	wh := hookConfig(r)
	wh.FailProbability = 1
	wh.MaxAttempts = 3
	h := start(t, sim.Config{Webhooks: wh})
	h.send(num, token, text("15550001111", "m1"))
	testwait.For(t, "given up", 10*time.Second, func() bool { return h.s.Stats().Webhooks.GaveUp == 1 })
	if n := len(r.all()); n != 3 {
		t.Fatalf("attempts %d, want 3", n)
	}
}

func TestWebhookFaultsDuplicateAndReorder(t *testing.T) {
	r := newReceiver(t, nil)
	wh := hookConfig(r)
	wh.Concurrency = 1
	h := start(t, sim.Config{Webhooks: wh, Faults: sim.Faults{WebhookDuplicate: 1}})
	h.send(num, token, text("15550001111", "m1"))
	testwait.For(t, "4 webhooks", 10*time.Second, func() bool { return h.s.Stats().Webhooks.Delivered == 4 })
	count := map[string]int{}
	for _, s := range statuses(t, r.all()) {
		count[s.Status.Status]++
	}
	if count["sent"] != 2 || count["delivered"] != 2 {
		t.Fatalf("counts %v", count)
	}

	r2 := newReceiver(t, nil)
	wh = hookConfig(r2)
	wh.Concurrency = 1
	wh.ReadProbability = 1
	wh.Delay = sim.Range{Min: 10 * time.Millisecond, Max: 10 * time.Millisecond}
	h2 := start(t, sim.Config{Webhooks: wh, Faults: sim.Faults{WebhookReorder: 1}})
	h2.send(num, token, text("15550001111", "m1"))
	testwait.For(t, "3 webhooks", 10*time.Second, func() bool { return h2.s.Stats().Webhooks.Delivered == 3 })
	var order []string
	var stamps []int64
	for _, s := range statuses(t, r2.all()) {
		order = append(order, s.Status.Status)
		ts, _ := strconv.ParseInt(s.Timestamp, 10, 64)
		stamps = append(stamps, ts)
	}
	if fmt.Sprint(order) != "[read delivered sent]" {
		t.Fatalf("order %v", order)
	}
	if stamps[0] < stamps[2] {
		t.Fatalf("timestamps %v: read must not be stamped before sent", stamps)
	}
	if st := h2.s.Stats().Numbers[num]; st.Faults["webhook_reorder"] != 1 {
		t.Fatalf("faults %+v", st.Faults)
	}
}

func TestWebhookQueueBounded(t *testing.T) {
	r := newReceiver(t, nil)
	wh := hookConfig(r)
	wh.QueueSize = 2
	wh.Delay = sim.Range{Min: time.Hour, Max: time.Hour} // nothing leaves
	h := start(t, sim.Config{Webhooks: wh})
	h.send(num, token, text("15550001111", "m1"))
	h.send(num, token, text("15550002222", "m2"))
	st := h.s.Stats().Webhooks
	if st.Pending != 2 || st.Dropped != 2 {
		t.Fatalf("stats %+v", st)
	}
	h.s.Reset()
	testwait.For(t, "queue cleared", 10*time.Second, func() bool { return h.s.Stats().Webhooks.Pending == 0 })
}

// With no delay every status is due at once; they must still leave in
// the order sent, delivered, read.
func TestWebhooksZeroDelayKeepOrder(t *testing.T) {
	r := newReceiver(t, nil)
	wh := hookConfig(r)
	wh.Delay = sim.Range{}
	wh.ReadProbability = 1
	wh.Concurrency = 1
	h := start(t, sim.Config{Webhooks: wh})
	for i := range 5 {
		h.send(num, token, text(fmt.Sprint("1555000000", i), fmt.Sprint("m", i)))
	}
	testwait.For(t, "15 webhooks", 10*time.Second, func() bool { return h.s.Stats().Webhooks.Delivered == 15 })
	last := map[string]string{}
	next := map[string]string{"": "sent", "sent": "delivered", "delivered": "read"}
	for _, s := range statuses(t, r.all()) {
		if want := next[last[s.ID]]; s.Status.Status != want {
			t.Fatalf("%s: %s after %q, want %s", s.ID, s.Status.Status, last[s.ID], want)
		}
		last[s.ID] = s.Status.Status
	}
}

// With no delay every status is due at once; a reorder fault must still
// reverse them (it is counted as done, so a gateway test relying on it
// would otherwise believe it had met out-of-order statuses).
func TestWebhooksZeroDelayReorder(t *testing.T) {
	r := newReceiver(t, nil)
	wh := hookConfig(r)
	wh.Delay = sim.Range{}
	wh.ReadProbability = 1
	wh.Concurrency = 1
	h := start(t, sim.Config{Webhooks: wh, Faults: sim.Faults{WebhookReorder: 1}})
	h.send(num, token, text("15550001111", "m1"))
	testwait.For(t, "3 webhooks", 10*time.Second, func() bool { return h.s.Stats().Webhooks.Delivered == 3 })
	var order []string
	for _, s := range statuses(t, r.all()) {
		order = append(order, s.Status.Status)
	}
	if fmt.Sprint(order) != "[read delivered sent]" {
		t.Fatalf("order %v with a reorder fault counted %d times", order, h.s.Stats().Numbers[num].Faults["webhook_reorder"])
	}
}
