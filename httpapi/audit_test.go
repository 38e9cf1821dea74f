package httpapi_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wamux/wamux/internal/apikey"
)

type auditRow struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	KeyID  string    `json:"key_id"`
	Route  string    `json:"route"`
	Target string    `json:"target"`
	Fields []string  `json:"fields"`
}

// TestAdminActionsAudited: every admin change that succeeds is listed at
// GET /v1/audit, newest first, with the key's id (not the key), the route,
// its target and the names of the fields set (never their values); a
// refused change and a read are not; only an admin key may read the list.
func TestAdminActionsAudited(t *testing.T) {
	f := newScopedServer(t)
	start := time.Now().Add(-time.Second)
	steps := []struct {
		key, method, path, body string
		want                    int
	}{
		{adminKey, "POST", "/v1/accounts", `{"id":"acc2","phone_number_id":"2","access_token":"` + testToken + `"}`, 201},
		{allKey, "PATCH", "/v1/accounts/acc2", `{"access_token":"` + testToken + `y","rate_per_sec":5}`, 200},
		{adminKey, "PATCH", "/v1/accounts/acc2", `{"base_url":"http://127.0.0.1:9"}`, 400}, // outside the allow-list
		{sendKey, "PATCH", "/v1/accounts/acc2", `{"rate_per_sec":6}`, 403},
		{adminKey, "PATCH", "/v1/config", `{"bloom":false,"gap_timeout":"2m"}`, 200},
		{adminKey, "POST", "/v1/messages/m1/release", ``, 0}, // the counting pipeline fails it
		{allKey, "GET", "/v1/accounts/acc2", ``, 200},
	}
	for _, s := range steps {
		r := f.as(t, s.key, s.method, s.path, s.body)
		if s.want != 0 && r.status != s.want {
			t.Fatalf("%s %s: %d %s, want %d", s.method, s.path, r.status, r.body, s.want)
		}
	}
	if r := f.as(t, readKey, "GET", "/v1/audit", ""); r.status != http.StatusForbidden {
		t.Errorf("GET /v1/audit with a read key: %d, want 403", r.status)
	}
	r := f.as(t, adminKey, "GET", "/v1/audit?limit=10", "")
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/audit: %d %s", r.status, r.body)
	}
	if strings.Contains(string(r.body), testToken) || strings.Contains(string(r.body), adminKey) || strings.Contains(string(r.body), "2m") {
		t.Fatalf("the audit shows a value or a key: %s", r.body)
	}
	var got struct {
		Actions []auditRow `json:"actions"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	want := []auditRow{
		{KeyID: apikey.ID(adminKey), Route: "PATCH /v1/config", Target: "", Fields: []string{"bloom", "gap_timeout"}},
		{KeyID: apikey.ID(allKey), Route: "PATCH /v1/accounts/{id}", Target: "acc2", Fields: []string{"access_token", "rate_per_sec"}},
		{KeyID: apikey.ID(adminKey), Route: "POST /v1/accounts", Target: "acc2", Fields: []string{"access_token", "id", "phone_number_id"}},
	}
	if len(got.Actions) != len(want) {
		t.Fatalf("audit has %d actions, want %d: %s", len(got.Actions), len(want), r.body)
	}
	for i, w := range want {
		g := got.Actions[i]
		if g.KeyID != w.KeyID || g.Route != w.Route || g.Target != w.Target || !slices.Equal(g.Fields, w.Fields) {
			t.Errorf("action %d = %+v, want %+v", i, g, w)
		}
		if g.At.Before(start) || g.At.After(time.Now().Add(time.Second)) || g.ID == 0 {
			t.Errorf("action %d: at %v, id %d", i, g.At, g.ID)
		}
	}
	if r := f.as(t, adminKey, "GET", "/v1/audit?limit=1", ""); !strings.Contains(string(r.body), "PATCH /v1/config") || strings.Contains(string(r.body), "POST /v1/accounts") {
		t.Errorf("limit=1: %s", r.body)
	}
	if !strings.Contains(f.logs.String(), `"msg":"admin action"`) {
		t.Error("admin actions are not logged")
	}
}
