package e2e_test

import (
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/wamux/wamux/config"
)

// docRoutes reads the routes of a table cell: "`POST /v1/a/{id}/x`,
// `/y`" is POST /v1/a/{id}/x and POST /v1/a/{id}/y.
func docRoutes(t *testing.T, cell string) []string {
	t.Helper()
	var out []string
	method, path := "", ""
	for _, s := range spans(cell) {
		if m := routeCell.FindStringSubmatch(s); m != nil {
			method, path = m[1], m[2]
		} else if strings.HasPrefix(s, "/") && path != "" {
			path = path[:strings.LastIndex(path, "/")] + s
		} else {
			t.Fatalf("%s: cannot read route %q", apiDoc, s)
		}
		out = append(out, method+" "+path)
	}
	return out
}

// TestAPIDocScopes holds the scope table of docs/api.md to the gateway:
// every /v1 route of the endpoint table is in it once, and a key holding
// both other scopes but not the one the table names is refused with 403
// naming it, while a key with that scope alone is not.
func TestAPIDocScopes(t *testing.T) {
	others := map[string]string{"send": "scope-ra-key-0001", "read": "scope-sa-key-0002", "admin": "scope-rs-key-0003"}
	alone := map[string]string{"send": "scope-s-key-0004", "read": "scope-r-key-0005", "admin": "scope-a-key-0006"}
	a := startAppWith(t, func(c *config.Config) {
		c.APIKeys = []string{others["send"] + ":read+admin", others["read"] + ":send+admin", others["admin"] + ":read+send",
			alone["send"] + ":send", alone["read"] + ":read", alone["admin"] + ":admin"}
	})

	scoped := map[string]string{}
	for _, row := range tableRows(section(t, apiDoc, "## Requests, errors and keys")) {
		sp := spans(row[0])
		if len(sp) != 1 || others[sp[0]] == "" {
			t.Fatalf("%s scope table: first cell %q is not a scope", apiDoc, row[0])
		}
		for _, route := range docRoutes(t, row[1]) {
			if prev, dup := scoped[route]; dup {
				t.Errorf("%s scope table lists %s under %s and %s", apiDoc, route, prev, sp[0])
			}
			scoped[route] = sp[0]
		}
	}
	var endpoints []string
	for _, row := range tableRows(section(t, apiDoc, "## Endpoints")) {
		for _, route := range docRoutes(t, row[0]) {
			if strings.Contains(route, " /v1/") {
				endpoints = append(endpoints, route)
			}
		}
	}
	for _, route := range endpoints {
		if _, ok := scoped[route]; !ok {
			t.Errorf("%s: %s is in the endpoint table, not in the scope table", apiDoc, route)
		}
	}
	if len(scoped) < 20 {
		t.Fatalf("only %d routes read from the scope table", len(scoped))
	}

	call := func(key, route string) (int, string) {
		method, path, _ := strings.Cut(route, " ")
		path = regexp.MustCompile(`\{[a-z_]+\}`).ReplaceAllString(path, "x1")
		var body io.Reader
		if method != "GET" {
			body = strings.NewReader("{}")
		}
		req, err := http.NewRequest(method, "http://"+a.Addr()+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(raw)
	}
	for _, route := range slices.Sorted(maps.Keys(scoped)) {
		need := scoped[route]
		if code, body := call(others[need], route); code != http.StatusForbidden || !strings.Contains(body, "the "+need+" scope") {
			t.Errorf("%s with a key lacking %s: %d %.200s, want 403 naming %s", route, need, code, body, need)
		}
		if code, body := call(alone[need], route); code == http.StatusForbidden || code == http.StatusUnauthorized {
			t.Errorf("%s with a %s key: %d %.200s", route, need, code, body)
		}
	}
}
