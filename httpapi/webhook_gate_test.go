package httpapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/provider/cloudapi"
)

// signalReader yields its first chunk, closes started, then blocks until
// release is closed and reports the end of the body.
type signalReader struct {
	first   []byte
	started chan struct{}
	release chan struct{}
	read    int
}

func (s *signalReader) Read(p []byte) (int, error) {
	if s.read == 0 {
		s.read = copy(p, s.first)
		close(s.started)
		return s.read, nil
	}
	<-s.release
	return 0, io.EOF
}

// TestWebhookBadSignatureIsNotParsed: a body that is not even JSON is
// answered 401 when its signature is wrong (the signature is checked
// before parsing), and 400 only when it is signed.
func TestWebhookBadSignatureIsNotParsed(t *testing.T) {
	b := newReceiptBundle(t)
	junk := []byte("{not json")
	if r := b.webhook(t, junk, cloudapi.Sign(junk, "another-secret")); r.status != http.StatusUnauthorized {
		t.Fatalf("junk with a wrong signature: %d %s, want 401", r.status, r.body)
	}
	if r := b.webhook(t, junk, cloudapi.Sign(junk, appSecret)); r.status != http.StatusBadRequest {
		t.Fatalf("signed junk: %d %s, want 400", r.status, r.body)
	}
	b.nothingStored(t, "junk bodies")
}

// TestWebhookRefusedBeforeTheBodyIsRead: a declared length over the limit
// and a missing signature are answered without a byte of the body read.
func TestWebhookRefusedBeforeTheBodyIsRead(t *testing.T) {
	b := newReceiptBundle(t)
	api := b.srv.Config.Handler
	for _, c := range []struct {
		name   string
		length int64
		sig    string
		want   int
	}{
		{"over the limit", httpapi.MaxBodyWebhook + 1, cloudapi.Sign([]byte("x"), appSecret), http.StatusRequestEntityTooLarge},
		{"no signature", 10, "", http.StatusUnauthorized},
		{"malformed signature", 10, "sha256=zz", http.StatusUnauthorized},
	} {
		body := &signalReader{first: []byte("{}"), started: make(chan struct{}), release: make(chan struct{})}
		req := httptest.NewRequest(http.MethodPost, "/webhook", body)
		req.ContentLength = c.length
		if c.sig != "" {
			req.Header.Set(cloudapi.SignatureHeader, c.sig)
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req) // would block on the body's second read
		if rec.Code != c.want || body.read != 0 {
			t.Errorf("%s: %d, %d bytes read; want %d and none read", c.name, rec.Code, body.read, c.want)
		}
		if !strings.Contains(rec.Body.String(), `"error"`) || rec.Header().Get("Connection") != "close" {
			t.Errorf("%s: body %q, Connection %q; want a JSON error and close", c.name, rec.Body, rec.Header().Get("Connection"))
		}
	}
}

// TestWebhookBodiesBounded: with one body being read and a bound of one,
// the next webhook is answered 503 with Retry-After at once, its body
// unread; once the first ends, webhooks are taken again.
func TestWebhookBodiesBounded(t *testing.T) {
	for _, c := range []struct {
		name      string
		configure func(*httpapi.Config)
	}{
		{"count", func(cfg *httpapi.Config) { cfg.WebhookMaxBodies = 1 }},
		{"bytes", func(cfg *httpapi.Config) { cfg.WebhookBodyBudget = 150 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, _ := newReceiptServerWith(t, false, c.configure)
			api := b.srv.Config.Handler
			slow := &signalReader{first: []byte("{}"), started: make(chan struct{}), release: make(chan struct{})}
			req := httptest.NewRequest(http.MethodPost, "/webhook", slow)
			req.ContentLength = 100
			req.Header.Set(cloudapi.SignatureHeader, cloudapi.Sign([]byte("{}"), appSecret))
			done := make(chan int)
			go func() {
				rec := httptest.NewRecorder()
				api.ServeHTTP(rec, req)
				done <- rec.Code
			}()
			<-slow.started

			second := &signalReader{first: []byte("{}"), started: make(chan struct{}), release: make(chan struct{})}
			req2 := httptest.NewRequest(http.MethodPost, "/webhook", second)
			req2.ContentLength = 100
			req2.Header.Set(cloudapi.SignatureHeader, cloudapi.Sign([]byte("{}"), appSecret))
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, req2)
			if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || second.read != 0 {
				t.Fatalf("second webhook: %d, Retry-After %q, %d bytes read; want 503, a Retry-After, none read",
					rec.Code, rec.Header().Get("Retry-After"), second.read)
			}
			if !strings.Contains(rec.Body.String(), `"unavailable"`) {
				t.Fatalf("503 body %q, want the JSON error", rec.Body)
			}
			close(slow.release)
			if code := <-done; code == http.StatusServiceUnavailable {
				t.Fatalf("first webhook answered %d", code)
			}
			body := []byte(`{"object":"whatsapp_business_account","entry":[]}`)
			if r := b.webhook(t, body, cloudapi.Sign(body, appSecret)); r.status != http.StatusOK {
				t.Fatalf("webhook after the first ended: %d %s", r.status, r.body)
			}
		})
	}
}

// errReader yields a chunk, then fails as a connection cut mid-body does.
type errReader struct{ done bool }

func (e *errReader) Read(p []byte) (int, error) {
	if e.done {
		return 0, io.ErrUnexpectedEOF
	}
	e.done = true
	return copy(p, "{"), nil
}

// TestWebhookRefusalsCounted: every refusal of a body before it verified
// counts once under its reason in wamux_webhook_refused_total (the 401s
// of a missing and of a wrong signature, the 413s of a declared and of a
// read length over the limit, the 503 of a full gate, the 400 of a body
// cut short); a verified body counts nothing.
func TestWebhookRefusalsCounted(t *testing.T) {
	b, _ := newReceiptServerWith(t, false, func(cfg *httpapi.Config) { cfg.WebhookMaxBodies = 1 })
	api := b.srv.Config.Handler
	post := func(body io.Reader, length int64, sig string) int {
		req := httptest.NewRequest(http.MethodPost, "/webhook", body)
		req.ContentLength = length
		if sig != "" {
			req.Header.Set(cloudapi.SignatureHeader, sig)
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		return rec.Code
	}
	good := []byte(`{"object":"whatsapp_business_account","entry":[]}`)
	big := strings.Repeat("x", httpapi.MaxBodyWebhook+1)
	for _, c := range []struct {
		name       string
		code, want int
	}{
		{"wrong signature", post(strings.NewReader(string(good)), int64(len(good)), cloudapi.Sign(good, "another-secret")), 401},
		{"no signature", post(strings.NewReader(string(good)), int64(len(good)), ""), 401},
		{"declared too large", post(strings.NewReader("{}"), httpapi.MaxBodyWebhook+1, cloudapi.Sign([]byte("{}"), appSecret)), 413},
		{"read too large", post(strings.NewReader(big), -1, cloudapi.Sign([]byte(big), appSecret)), 413},
		{"cut short", post(&errReader{}, 10, cloudapi.Sign([]byte("{}"), appSecret)), 400},
		{"verified", post(strings.NewReader(string(good)), int64(len(good)), cloudapi.Sign(good, appSecret)), 200},
	} {
		if c.code != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.code, c.want)
		}
	}
	slow := &signalReader{first: []byte("{}"), started: make(chan struct{}), release: make(chan struct{})}
	done := make(chan int)
	go func() { done <- post(slow, 100, cloudapi.Sign([]byte("{}"), appSecret)) }()
	<-slow.started
	if code := post(strings.NewReader("{}"), 2, cloudapi.Sign([]byte("{}"), appSecret)); code != http.StatusServiceUnavailable {
		t.Errorf("with the gate full: %d, want 503", code)
	}
	close(slow.release)
	<-done
	metrics := string(b.do(t, http.MethodGet, "/metrics", "", nil).body)
	for _, want := range []string{`wamux_webhook_refused_total{reason="signature"} 2`, `wamux_webhook_refused_total{reason="too_large"} 2`,
		`wamux_webhook_refused_total{reason="busy"} 1`, `wamux_webhook_refused_total{reason="unreadable"} 1`} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
}
