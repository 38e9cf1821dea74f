package cloudapi_test

import (
	"net/http"
	"testing"

	"github.com/wamux/wamux/provider/cloudapi"
)

func FuzzClassify(f *testing.F) {
	f.Add(200, []byte(`{"messages":[{"id":"wamid.X"}]}`), "")
	f.Add(400, errBody(130429, 2494055), "3")
	f.Add(400, errBody(100, 33), "")
	f.Add(500, []byte(`{"error":{"code":null}}`), "Wed, 21 Oct 2015 07:28:00 GMT")
	f.Add(503, []byte(`{"error":{"code":-5,"message":"`+string(make([]byte, 400))+`"}}`), "-1")
	f.Add(429, []byte(`{"error":"nope"}`), "99999999999999999999")
	f.Fuzz(func(t *testing.T, status int, body []byte, retryAfter string) {
		h := http.Header{}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		r := cloudapi.Classify(status, body, h, nil)
		if r.Outcome < cloudapi.Accepted || r.Outcome > cloudapi.Unknown {
			t.Fatalf("outcome %d out of range", r.Outcome)
		}
		if r.Outcome == cloudapi.Accepted && r.WAMID == "" {
			t.Fatal("accepted without a wamid")
		}
		if r.Delay < 0 {
			t.Fatalf("negative delay %v", r.Delay)
		}
		if r.Outcome != cloudapi.Accepted && r.Reason == "" {
			t.Fatal("failure without a reason")
		}
	})
}

func FuzzParseWebhook(f *testing.F) {
	f.Add([]byte(twoStatuses))
	f.Add([]byte(`{"object":"whatsapp_business_account","entry":[{"changes":[{"value":{"errors":[{"code":1}]}}]}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		w, err := cloudapi.ParseWebhook(body)
		if err != nil {
			return
		}
		for _, e := range w.Entry {
			for _, c := range e.Changes {
				for _, s := range c.Value.Statuses {
					r, err := s.Receipt()
					if err == nil && (r.MessageID == "" || r.Type.Version() == 0) {
						t.Fatalf("receipt %+v from %+v", r, s)
					}
				}
			}
		}
	})
}

func FuzzVerifySignature(f *testing.F) {
	f.Add("sha256=00", []byte("{}"), "k")
	f.Add(cloudapi.Sign([]byte("{}"), "k"), []byte("{}"), "k")
	f.Add("", []byte(nil), "")
	f.Fuzz(func(t *testing.T, header string, body []byte, secret string) {
		got := cloudapi.VerifySignature(header, body, secret)
		if got && secret == "" {
			t.Fatal("verified with an empty secret")
		}
		if secret != "" && !cloudapi.VerifySignature(cloudapi.Sign(body, secret), body, secret) {
			t.Fatal("own signature does not verify")
		}
	})
}
