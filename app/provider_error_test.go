package app_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wamux/wamux/app"
	"github.com/wamux/wamux/config"
	"github.com/wamux/wamux/internal/testwait"
)

// TestForeignBodyNeverReachesLastError: a provider host that answers with
// an HTML page (as a proxy, a captive portal or any non-Meta host does)
// leaves in the message's last_error only the HTTP status, none of the
// page.
func TestForeignBodyNeverReachesLastError(t *testing.T) {
	const marker = "FOREIGN-PAGE-MARKER"
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, "<html><body><h1>"+marker+"</h1><p>internal host 10.1.2.3</p></body></html>")
	}))
	defer provider.Close()

	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.APIKeys, cfg.ProviderBaseURLs = "127.0.0.1:0", t.TempDir(), []string{testKey}, provider.URL
	a := app.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Stop(ctx)
	}()
	call(t, a, "PATCH", "/v1/config", `{"max_attempts":1}`)
	call(t, a, "POST", "/v1/accounts", `{"id":"acc","phone_number_id":"555009","access_token":"tok-555009","base_url":"`+provider.URL+`"}`)
	call(t, a, "POST", "/v1/messages", `{"msg_id":"m1","biz_type":"t","account_id":"acc","to":"15550001","type":"text","text":{"body":"hi"}}`)
	var msg struct {
		Status    string `json:"status"`
		LastError string `json:"last_error"`
	}
	testwait.For(t, "the message to fail", 30*time.Second, func() bool {
		if err := json.Unmarshal([]byte(call(t, a, "GET", "/v1/messages/m1", "")), &msg); err != nil {
			t.Fatal(err)
		}
		return msg.Status == "failed"
	})
	if msg.LastError != "gave up after 1 attempts: http 400" || strings.Contains(msg.LastError, marker) {
		t.Errorf("last_error = %q, want the status only", msg.LastError)
	}
}
