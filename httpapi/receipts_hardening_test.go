package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux/httpapi"
	"github.com/wamux/wamux/settings"
)

// hardeningBundle: real SQLite, real settings, real receipt pipeline wired to
// the settings, and the API with /v1/config.
type hardeningBundle struct {
	*receiptBundle
	set *settings.Manager
}

func newHardeningBundle(t *testing.T) *hardeningBundle {
	t.Helper()
	b, set := newReceiptServer(t, true)
	return &hardeningBundle{receiptBundle: b, set: set}
}

// A boolean switch must be a boolean (or "true"/"false"): a number is a
// value of the wrong type and must be refused, changing nothing.
func TestConfigSwitchRefusesNumbers(t *testing.T) {
	b := newHardeningBundle(t)
	for _, body := range []string{`{"apply_state":0}`, `{"bloom":0}`, `{"ordering":1}`, `{"bloom":"0"}`, `{"apply_state":"f"}`} {
		r := b.json(t, http.MethodPatch, "/v1/config", body)
		if r.status != http.StatusBadRequest {
			t.Errorf("PATCH %s = %d %s, want 400", body, r.status, r.body)
		}
	}
	if c := b.set.Current(); c != settings.Defaults() {
		t.Fatalf("refused switches changed the settings: %+v", c)
	}
	if stored, _ := b.store.Settings(context.Background()); len(stored) != 0 {
		t.Fatalf("refused switches were stored: %v", stored)
	}
}

// The agent never sends more than 1,000 receipts (agent.MaxBatchLimit),
// messages:batch takes at most 1,000: a receipts batch beyond that should
// be a 400 (or 413), and nothing stored.
func TestReceiptsBatchCountBounded(t *testing.T) {
	b := newHardeningBundle(t)
	var sb strings.Builder
	sb.WriteString(`{"account_id":"acc1","receipts":[`)
	const n = 20000
	for i := 0; i < n; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"message_id":"w%d","type":"sent","event_time":1750030073000}`, i)
	}
	sb.WriteString(`]}`)
	r := b.json(t, http.MethodPost, "/v1/receipts:batch", sb.String())
	if r.status/100 != 4 {
		t.Fatalf("%d receipts in one batch (%d bytes) = %d %.200s, want a 4xx", n, sb.Len(), r.status, r.body)
	}
	errorOf(t, r)
	b.nothingStored(t, "an oversized batch")
}

// Every list limit outside 1..1000 is a 400 in the JSON envelope; the
// bounds themselves are taken.
func TestListLimits(t *testing.T) {
	b := newHardeningBundle(t)
	for _, path := range []string{"/v1/dead-letters", "/v1/late-receipts"} {
		for _, q := range []string{"0", "-1", "1001", "abc", "1e3", "99999999999999999999", "%20"} {
			r := b.json(t, http.MethodGet, path+"?limit="+q, "")
			if r.status != http.StatusBadRequest {
				t.Errorf("%s?limit=%s = %d %s, want 400", path, q, r.status, r.body)
				continue
			}
			errorOf(t, r)
		}
		for _, q := range []string{"", "?limit=1", "?limit=1000"} {
			if r := b.json(t, http.MethodGet, path+q, ""); r.status != 200 || r.header.Get("Content-Type") != "application/json" {
				t.Errorf("%s%s = %d %s", path, q, r.status, r.body)
			}
		}
	}
}

// Bad receipts: 400 in the envelope, nothing stored.
func TestReceiptsBatchRejects(t *testing.T) {
	b := newHardeningBundle(t)
	long := strings.Repeat("a", 1025)
	cases := map[string]struct {
		ct, body string
		status   int
	}{
		"text/plain":     {"text/plain", `{"account_id":"acc1","receipts":[{"message_id":"w","type":"sent","event_time":1750030073000}]}`, 415},
		"blank id":       {"", `{"account_id":"acc1","receipts":[{"message_id":"w","type":"sent","event_time":1750030073000},{"message_id":"  ","type":"sent","event_time":1750030073000}]}`, 400},
		"nul id":         {"", `{"account_id":"acc1","receipts":[{"message_id":"w","type":"sent","event_time":1750030073000},{"message_id":"a\u0000b","type":"sent","event_time":1750030073000}]}`, 400},
		"long id":        {"", `{"account_id":"acc1","receipts":[{"message_id":"w","type":"sent","event_time":1750030073000},{"message_id":"` + long + `","type":"sent","event_time":1750030073000}]}`, 400},
		"year 10000":     {"", `{"account_id":"acc1","receipts":[{"message_id":"w","type":"sent","event_time":1750030073000},{"message_id":"x","type":"sent","event_time":253402300800000}]}`, 400},
		"max int64":      {"", `{"account_id":"acc1","receipts":[{"message_id":"w","type":"sent","event_time":9223372036854775807}]}`, 400},
		"float time":     {"", `{"account_id":"acc1","receipts":[{"message_id":"w","type":"sent","event_time":1.5}]}`, 400},
		"huge version":   {"", `{"account_id":"acc1","receipts":[{"message_id":"w","type":"sent","event_time":1750030073000,"version":99999999999999999999}]}`, 400},
		"negative ver":   {"", `{"account_id":"acc1","receipts":[{"message_id":"w","type":"failed","event_time":1750030073000,"version":-1}]}`, 400},
		"receipts null":  {"", `{"account_id":"acc1","receipts":null}`, 400},
		"receipt null":   {"", `{"account_id":"acc1","receipts":[null]}`, 400},
		"account blank":  {"", `{"account_id":" ","receipts":[{"message_id":"w","type":"sent","event_time":1750030073000}]}`, 400},
		"account padded": {"", `{"account_id":" acc1 ","receipts":[{"message_id":"w","type":"sent","event_time":1750030073000}]}`, 400},
		"array body":     {"", `[]`, 400},
		"trailing":       {"", `{"account_id":"acc1","receipts":[{"message_id":"w","type":"sent","event_time":1750030073000}]} x`, 400},
	}
	for name, c := range cases {
		ct := c.ct
		if ct == "" {
			ct = "application/json"
		}
		r := b.do(t, http.MethodPost, "/v1/receipts:batch", testKey, strings.NewReader(c.body), "Content-Type", ct)
		if r.status != c.status {
			t.Errorf("%s: %d %.300s, want %d", name, r.status, r.body, c.status)
			continue
		}
		errorOf(t, r)
	}
	b.nothingStored(t, "rejected batches")
}

// Secrets given in a header, the query or the body of these routes (and
// the configured ones) never reach logs, metrics or responses.
func TestReceiptRoutesLeakNoSecret(t *testing.T) {
	b := newHardeningBundle(t)
	var seen strings.Builder
	rec := func(r response) {
		seen.Write(r.body)
		for k, v := range r.header {
			seen.WriteString(k + ": " + strings.Join(v, ",") + "\n")
		}
	}
	rec(b.json(t, http.MethodPost, "/v1/receipts:batch", `{"account_id":"acc1","receipts":[{"message_id":"w","type":"sent","event_time":1750030073000}]}`))
	rec(b.do(t, http.MethodPost, "/v1/receipts:batch", testKey+"x", strings.NewReader(`{}`)))
	rec(b.do(t, http.MethodGet, "/v1/dead-letters?access_token="+testToken, testKey, nil, "X-Api-Key", testKey, "Cookie", "s="+appSecret))
	rec(b.do(t, http.MethodGet, "/v1/late-receipts?limit="+testKey, testKey, nil))
	rec(b.json(t, http.MethodPatch, "/v1/config", `{"bloom":"`+appSecret+`"}`))
	rec(b.json(t, http.MethodPatch, "/v1/config", `{"late_window":"1m"}`))
	rec(b.json(t, http.MethodGet, "/v1/config", ""))
	rec(b.do(t, http.MethodGet, "/webhook?hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=x", "", nil))
	rec(b.do(t, http.MethodGet, "/metrics", "", nil))
	logs := b.logs.String()
	if !strings.Contains(logs, "http request") || !strings.Contains(logs, "setting changed") {
		t.Fatalf("expected log lines missing; logs:\n%s", logs)
	}
	for _, secret := range []string{testKey, testToken, appSecret, verifyToken} {
		if strings.Contains(logs, secret) {
			t.Errorf("secret %q in logs", secret)
		}
		if strings.Contains(seen.String(), secret) {
			t.Errorf("secret %q in responses/metrics", secret)
		}
	}
}

// Concurrent PATCHes of different keys: none is lost, in memory or store.
func TestConcurrentPatches(t *testing.T) {
	b := newHardeningBundle(t)
	bodies := []string{`{"bloom":false}`, `{"apply_state":false}`, `{"late_window":"2m"}`, `{"ordering":false}`,
		`{"gap_timeout":"1m"}`, `{"quiet_period":"10s"}`}
	var wg sync.WaitGroup
	for _, body := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPatch, b.srv.URL+"/v1/config", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+testKey)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Errorf("%s: %d", body, res.StatusCode)
			}
		}()
	}
	wg.Wait()
	want := map[string]string{"bloom": "false", "apply_state": "false", "late_window": "2m0s", "ordering": "false", "gap_timeout": "1m0s", "quiet_period": "10s"}
	cur := b.set.Current().Map()
	stored, _ := b.store.Settings(context.Background())
	for k, v := range want {
		if cur[k] != v || stored[k] != v {
			t.Errorf("%s: current %q stored %q, want %q", k, cur[k], stored[k], v)
		}
	}
}

// The largest batch the body limit lets through (≈8 MiB of small
// receipts) must not end in a 5xx.
func TestReceiptsBatchFullBodyNo5xx(t *testing.T) {
	b := newHardeningBundle(t)
	var sb strings.Builder
	sb.WriteString(`{"account_id":"acc1","receipts":[`)
	n := 0
	for sb.Len() < httpapi.MaxBodyBatch-100 {
		if n > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"message_id":"w%d","type":"sent","event_time":1750030073000}`, n)
		n++
	}
	sb.WriteString(`]}`)
	start := time.Now()
	r := b.json(t, http.MethodPost, "/v1/receipts:batch", sb.String())
	t.Logf("%d receipts, %d bytes: %d %.200s in %s", n, sb.Len(), r.status, r.body, time.Since(start))
	if r.status >= 500 {
		t.Fatalf("full batch = %d", r.status)
	}
}

// TestReceiptsBatchNamesBadReceipt: a batch refused for one receipt names
// it as receipts[i], whichever check refuses it (docs/api.md's promise an
// agent's author relies on to find the receipt), and stores nothing.
func TestReceiptsBatchNamesBadReceipt(t *testing.T) {
	b := newHardeningBundle(t)
	const good = `{"message_id":"wamid.ok","type":"sent","event_time":1750030073000}`
	for name, bad := range map[string]string{
		"blank message_id":     `{"message_id":" ","type":"sent","event_time":1750030073000}`,
		"no message_id":        `{"type":"sent","event_time":1750030073000}`,
		"NUL in message_id":    `{"message_id":"a\u0000b","type":"sent","event_time":1750030073000}`,
		"event_time in 1970":   `{"message_id":"wamid.x","type":"sent","event_time":999}`,
		"event_time past 9999": `{"message_id":"wamid.x","type":"sent","event_time":253402300800000}`,
		"event_time in 2100":   `{"message_id":"wamid.x","type":"sent","event_time":4102444800000}`,
		"event_time an hour ahead": `{"message_id":"wamid.x","type":"sent","event_time":` +
			strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10) + `}`,
		"unknown type": `{"message_id":"wamid.x","type":"played","event_time":1750030073000}`,
	} {
		r := b.json(t, http.MethodPost, "/v1/receipts:batch", `{"account_id":"acc1","receipts":[`+good+`,`+bad+`]}`)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, r.status, r.body)
			continue
		}
		errorOf(t, r)
		if !strings.Contains(string(r.body), `"message":"receipts[1]: `) {
			t.Errorf("%s: %s does not name receipts[1]", name, r.body)
		}
	}
	b.nothingStored(t, "batches with a bad receipt")
}
