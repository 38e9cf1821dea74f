package httpapi_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/wamux/wamux/ratelimit"
	"github.com/wamux/wamux/settings"
)

// do sends a request with the API key to the full server.
func (f *fullServer) do(t *testing.T, method, path, ctype, body string) response {
	t.Helper()
	b := &bundle{srv: f.srv}
	return b.do(t, method, path, testKey, strings.NewReader(body), "Content-Type", ctype)
}

// TestInvalidUTF8IsRefused: JSON must be UTF-8 (RFC 8259 §8.1). A body
// with broken bytes inside a string is a 400 that changes nothing, not a
// message whose text silently carries U+FFFD to the customer.
func TestInvalidUTF8IsRefused(t *testing.T) {
	f := newFullServer(t)
	ctx := context.Background()
	before, _ := f.store.GetAccount(ctx, "acc1")
	cases := []struct{ method, path, body string }{
		{"POST", "/v1/messages", `{"biz_type":"b","to":"15551234567","type":"text","text":{"body":"caf` + "\xe9" + `"}}`},
		{"POST", "/v1/messages:batch", `{"messages":[{"biz_type":"b","to":"15551234567","type":"text","text":{"body":"` + "\xff\xfe" + `"}}]}`},
		{"POST", "/v1/accounts", `{"id":"acc2","phone_number_id":"2","access_token":"t","base_url":"https://example.com/` + "\xc3\x28" + `"}`},
		{"PATCH", "/v1/accounts/acc1", `{"base_url":"https://example.com/` + "\xed\xa0\x80" + `"}`},
		{"PATCH", "/v1/config", `{"gap_timeout":"1m` + "\x80" + `"}`},
		{"POST", "/v1/receipts:batch", `{"account_id":"acc1","receipts":[{"message_id":"w` + "\xf8" + `","type":"sent","event_time":1}]}`},
	}
	for _, c := range cases {
		r := f.do(t, c.method, c.path, "application/json", c.body)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s %s with invalid UTF-8: %d %.200s, want 400", c.method, c.path, r.status, r.body)
			continue
		}
		errorOf(t, r)
	}
	if c := f.pipes.calls.Load(); c != 0 {
		t.Errorf("invalid UTF-8 reached the pipelines %d times", c)
	}
	after, _ := f.store.GetAccount(ctx, "acc1")
	if after.BaseURL != before.BaseURL || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("invalid UTF-8 changed the account: %+v → %+v", before, after)
	}
	if all, _ := f.store.ListAccounts(ctx); len(all) != 1 {
		t.Errorf("invalid UTF-8 created accounts: %d", len(all))
	}
	if c := f.set.Current(); c != settings.Defaults() {
		t.Errorf("invalid UTF-8 changed the settings: %+v", c)
	}
}

// TestAccountRefusesUnusableToken: the access token goes out as
// "Authorization: Bearer <token>", whose syntax is RFC 6750's b64token. A
// token with a control character cannot be sent at all (net/http refuses
// the header) and one with spaces or non-ASCII is none Meta issues: each
// is a 400 that changes nothing, not an account whose every send fails.
// A base_url is bounded like every other string.
func TestAccountRefusesUnusableToken(t *testing.T) {
	f := newFullServer(t)
	ctx := context.Background()
	before, _ := f.store.GetAccount(ctx, "acc1")
	bad := map[string]string{
		"nul":        `"tok\u0000en"`,
		"escape":     `"tok\u001ben"`,
		"delete":     `"tok\u007fen"`,
		"non-ascii":  `"tökén"`,
		"nbsp":       `"tok\u00a0en"`,
		"comma":      `"tok,en"`,
		"inner '='":  `"tok=en"`,
		"only '='":   `"=="`,
		"too long":   `"` + strings.Repeat("t", 4097) + `"`,
		"vertical":   `"tok\u000ben"`,
		"line break": `"tok\u2028en"`,
	}
	for name, token := range bad {
		r := f.do(t, "POST", "/v1/accounts", "application/json", `{"id":"acc2","phone_number_id":"2","access_token":`+token+`}`)
		if r.status != http.StatusBadRequest {
			t.Errorf("create with a %s token: %d %.200s, want 400", name, r.status, r.body)
		} else {
			errorOf(t, r)
		}
		r = f.do(t, "PATCH", "/v1/accounts/acc1", "application/json", `{"access_token":`+token+`}`)
		if r.status != http.StatusBadRequest {
			t.Errorf("patch with a %s token: %d %.200s, want 400", name, r.status, r.body)
		}
	}
	longURL := `"https://example.com/` + strings.Repeat("p", 4096) + `"`
	if r := f.do(t, "POST", "/v1/accounts", "application/json", `{"id":"acc3","phone_number_id":"3","access_token":"t","base_url":`+longURL+`}`); r.status != http.StatusBadRequest {
		t.Errorf("create with a 4 KiB base_url: %d, want 400", r.status)
	}
	if r := f.do(t, "PATCH", "/v1/accounts/acc1", "application/json", `{"base_url":`+longURL+`}`); r.status != http.StatusBadRequest {
		t.Errorf("patch with a 4 KiB base_url: %d, want 400", r.status)
	}
	after, _ := f.store.GetAccount(ctx, "acc1")
	if after.AccessToken != before.AccessToken || after.BaseURL != before.BaseURL || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("refused patches changed the account")
	}
	if all, _ := f.store.ListAccounts(ctx); len(all) != 1 {
		t.Errorf("refused creates stored accounts: %d", len(all))
	}
	for _, good := range []string{"EAAGm0PX4ZCpsBA", "a-b.c_d~e+f/g==", "t"} {
		r := f.do(t, "PATCH", "/v1/accounts/acc1", "application/json", `{"access_token":"`+good+`"}`)
		if r.status != http.StatusOK {
			t.Errorf("patch with token %q: %d %s, want 200", good, r.status, r.body)
		}
	}
}

// TestListQueryIsStrict: the list endpoints take one query parameter,
// limit. A parameter they do not know (a client paging with ?after= would
// get the same first page for ever), a limit given empty or twice, or a
// query that does not parse is a 400 like an unknown body field.
func TestListQueryIsStrict(t *testing.T) {
	f := newFullServer(t)
	for _, path := range []string{"/v1/dead-letters", "/v1/late-receipts"} {
		for _, q := range []string{"?after=", "?after=123", "?limit=10&cursor=x", "?limit=", "?limit=5&limit=abc",
			"?limit=5&limit=5", "?limit=%zz", "?limit=5;after=1", "?Limit=5"} {
			r := f.do(t, "GET", path+q, "", "")
			if r.status != http.StatusBadRequest {
				t.Errorf("GET %s%s = %d %.200s, want 400", path, q, r.status, r.body)
				continue
			}
			errorOf(t, r)
		}
		for _, q := range []string{"", "?", "?limit=1", "?limit=1000"} {
			if r := f.do(t, "GET", path+q, "", ""); r.status != http.StatusOK {
				t.Errorf("GET %s%s = %d %s, want 200", path, q, r.status, r.body)
			}
		}
	}
}

// TestAccountRateTheLimiterTakes: the send pipeline's limiter takes rates
// from one message an hour (ratelimit.MinLimitRate) up. A smaller rate the
// API stored anyway (201) was refused by the limiter: the account got no
// sender, and the next start failed on it ("outbound: limit for …"), so
// one request kept the gateway down. Such a rate is a 400 that changes
// nothing; the limiter's smallest rate is taken.
func TestAccountRateTheLimiterTakes(t *testing.T) {
	f := newFullServer(t)
	ctx := context.Background()
	before, _ := f.store.GetAccount(ctx, "acc1")
	for _, rate := range []string{"0.0001", "1e-7", "5e-324", "0.000277"} {
		r := f.do(t, "POST", "/v1/accounts", "application/json", `{"id":"slow","phone_number_id":"9","access_token":"t","rate_per_sec":`+rate+`}`)
		if r.status != http.StatusBadRequest {
			t.Errorf("create with rate_per_sec %s: %d %.200s, want 400", rate, r.status, r.body)
		}
		r = f.do(t, "PATCH", "/v1/accounts/acc1", "application/json", `{"rate_per_sec":`+rate+`}`)
		if r.status != http.StatusBadRequest {
			t.Errorf("patch with rate_per_sec %s: %d %.200s, want 400", rate, r.status, r.body)
		}
	}
	after, _ := f.store.GetAccount(ctx, "acc1")
	if after.RatePerSec != before.RatePerSec || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("refused rates changed the account: %v → %v", before.RatePerSec, after.RatePerSec)
	}
	if _, err := f.store.GetAccount(ctx, "slow"); err == nil {
		t.Error("a refused rate created the account")
	}
	hourly := strconv.FormatFloat(ratelimit.MinLimitRate, 'g', -1, 64)
	if r := f.do(t, "POST", "/v1/accounts", "application/json", `{"id":"hourly","phone_number_id":"8","access_token":"t","rate_per_sec":`+hourly+`}`); r.status != http.StatusCreated {
		t.Errorf("create with one message an hour (%s): %d %s, want 201", hourly, r.status, r.body)
	}
}

// TestBearerSchemeIsCaseInsensitive: an auth scheme is case-insensitive
// (RFC 9110 §11.1, RFC 6750 §2.1), and some clients send "bearer"; the key
// itself is compared exactly.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	f := newFullServer(t)
	b := &bundle{srv: f.srv}
	for _, scheme := range []string{"Bearer", "bearer", "BEARER", "bEaReR"} {
		r := b.do(t, "GET", "/v1/accounts", "", nil, "Authorization", scheme+" "+testKey)
		if r.status != http.StatusOK {
			t.Errorf("%s <key>: %d %s, want 200", scheme, r.status, r.body)
		}
	}
	for _, auth := range []string{"bearer " + strings.ToUpper(testKey), "Bearer" + testKey, "Bearerx " + testKey, "Beare " + testKey} {
		if r := b.do(t, "GET", "/v1/accounts", "", nil, "Authorization", auth); r.status != http.StatusUnauthorized {
			t.Errorf("%q: %d, want 401", auth, r.status)
		}
	}
}

// TestReceiptsBatchBoundsAccountID: account_id is an account's id (at
// most 64 characters, as POST /v1/accounts takes). A longer one is a 400
// that does not echo it back (it was looked up in the store and quoted
// whole in the error, up to the 8 MiB body).
func TestReceiptsBatchBoundsAccountID(t *testing.T) {
	f := newFullServer(t)
	for _, id := range []string{strings.Repeat("a", 65), strings.Repeat("acc1", 16<<10), "acc1\u0000", "acc1/../x"} {
		r := f.do(t, "POST", "/v1/receipts:batch", "application/json",
			`{"account_id":"`+id+`","receipts":[{"message_id":"w","type":"sent","event_time":1}]}`)
		if r.status != http.StatusBadRequest {
			t.Errorf("account_id of %d bytes: %d, want 400", len(id), r.status)
			continue
		}
		errorOf(t, r)
		if len(r.body) > 1024 {
			t.Errorf("account_id of %d bytes: the error is %d bytes long: it echoes the input", len(id), len(r.body))
		}
	}
	if c := f.pipes.calls.Load(); c != 0 {
		t.Errorf("refused batches reached the pipeline %d times", c)
	}
}
