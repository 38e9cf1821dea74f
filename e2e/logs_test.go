package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux/app"
	"github.com/wamux/wamux/config"
)

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogsCarryRequestIDsAndNoSecrets runs the real app with JSON logs at
// debug level, drives requests that log in the HTTP layer and below it
// (a settings change is logged by the settings manager), and checks every
// line: the lines of a request carry its id, and no line holds the API
// key, the app secret, the verify token or an account's access token.
func TestLogsCarryRequestIDsAndNoSecrets(t *testing.T) {
	const (
		apiKey      = "e2e-logs-key-0123456789"
		appSecret   = "e2e-app-SECRET-abcdef"
		verifyToken = "e2e-verify-TOKEN-xyz"
		accessToken = "EAAGe2eACCESStoken987654321"
	)
	logs := &syncBuffer{}
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.APIKeys, cfg.AppSecret, cfg.VerifyToken = "127.0.0.1:0", t.TempDir(), []string{apiKey}, appSecret, verifyToken
	a := app.New(cfg, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Stop(ctx)
	}()
	base := "http://" + a.Addr()
	do := func(method, path, id, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+apiKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", id)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	account := `{"id":"log-acct","phone_number_id":"106540352249999","access_token":"` + accessToken + `","rate_per_sec":5}`
	if code := do("POST", "/v1/accounts", "e2e-create", account); code != 201 {
		t.Fatalf("create account: %d", code)
	}
	if code := do("PATCH", "/v1/config", "e2e-patch", `{"gap_timeout":"90s","bloom":false}`); code != 200 {
		t.Fatalf("patch config: %d", code)
	}
	if code := do("PATCH", "/v1/config", "e2e-bad-patch", `{"gap_timeout":"soon"}`); code != 400 {
		t.Fatalf("bad patch: %d", code)
	}
	if code := do("PATCH", "/v1/accounts/log-acct", "e2e-token", `{"access_token":"`+accessToken+`2"}`); code != 200 {
		t.Fatalf("patch token: %d", code)
	}
	if code := do("GET", "/webhook?hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=1", "e2e-verify", ""); code != 403 {
		t.Fatalf("webhook verification with a wrong token: %d", code)
	}
	do("GET", "/ui/state", "e2e-ui", "")

	text := logs.String()
	for _, secret := range []string{apiKey, appSecret, verifyToken, accessToken} {
		if strings.Contains(text, secret) {
			t.Errorf("a log line holds the secret %q", secret)
		}
	}
	changed := map[string]string{} // key → request_id of its "setting changed" line
	requestLines := 0
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("not a JSON log line: %q", sc.Text())
		}
		id, _ := line["request_id"].(string)
		if n := strings.Count(sc.Text(), `"request_id"`); n > 1 {
			t.Errorf("request_id %d times in one line: %s", n, sc.Text())
		}
		switch line["msg"] {
		case "http request":
			requestLines++
			if id == "" {
				t.Errorf("request line without a request_id: %s", sc.Text())
			}
		case "setting changed":
			key, _ := line["key"].(string)
			changed[key] = id
			if line["old"] == nil || line["new"] == nil {
				t.Errorf("setting change without old and new values: %s", sc.Text())
			}
		}
	}
	if requestLines < 6 {
		t.Fatalf("only %d request lines logged; the checks above prove little\n%s", requestLines, text)
	}
	if changed["gap_timeout"] != "e2e-patch" || changed["bloom"] != "e2e-patch" {
		t.Errorf("setting changes not logged with the PATCH's request id: %v", changed)
	}
	if len(changed) != 2 {
		t.Errorf("changes logged: %v, want gap_timeout and bloom only (the refused PATCH changes nothing)", changed)
	}
}
