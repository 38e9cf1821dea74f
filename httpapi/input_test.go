package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

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
