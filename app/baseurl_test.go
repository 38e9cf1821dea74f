package app_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wamux/wamux/app"
	"github.com/wamux/wamux/config"
	"github.com/wamux/wamux/internal/testwait"
)

// lockedBuffer collects log output written from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStoredBaseURLOutsideListKeepsSending: an account stored with a
// base_url the allow-list no longer holds is named in a warning at start
// and keeps sending there; a change of it must fall under the list.
func TestStoredBaseURLOutsideListKeepsSending(t *testing.T) {
	s, simURL := startSim(t)
	dir := t.TempDir()
	start := func(allowed string, logs *lockedBuffer) *app.App {
		cfg := config.Default()
		cfg.Listen, cfg.DataDir, cfg.APIKeys, cfg.ProviderBaseURLs = "127.0.0.1:0", dir, []string{testKey}, allowed
		a := app.New(cfg, slog.New(slog.NewTextHandler(logs, nil)))
		if err := a.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		return a
	}
	stop := func(a *app.App) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}

	first := &lockedBuffer{}
	a := start(simURL, first)
	call(t, a, "POST", "/v1/accounts", fmt.Sprintf(
		`{"id":"acc","phone_number_id":"555001","access_token":"tok-555001","base_url":%q,"rate_per_sec":50}`, simURL))
	stop(a)
	if strings.Contains(first.String(), "outside provider_base_urls") {
		t.Fatalf("a warning with the simulator allowed:\n%s", first.String())
	}

	logs := &lockedBuffer{}
	a = start("https://graph.facebook.com", logs)
	defer stop(a)
	if !strings.Contains(logs.String(), "account base_url is outside provider_base_urls") || !strings.Contains(logs.String(), "account_id=acc") {
		t.Fatalf("no warning for the stored account:\n%s", logs.String())
	}
	call(t, a, "POST", "/v1/messages", `{"biz_type":"t","account_id":"acc","to":"15550001","type":"text","text":{"body":"hi"}}`)
	testwait.For(t, "the message to reach the simulator", 30*time.Second, func() bool {
		return s.Stats().Totals.Accepted >= 1
	})
	req := fmt.Sprintf(`{"base_url":%q}`, simURL+"/other")
	if code, body := callStatus(t, a, "PATCH", "/v1/accounts/acc", req); code != 400 || !strings.Contains(body, "graph.facebook.com") {
		t.Errorf("a change within the old host: %d %s, want 400", code, body)
	}
	if strings.Contains(logs.String(), "tok-555001") {
		t.Error("the access token is in the logs")
	}
}

// callStatus is call for answers that may be errors.
func callStatus(t *testing.T, a *app.App, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+a.Addr()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw)
}
