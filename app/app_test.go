package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wamux/wamux/app"
	"github.com/wamux/wamux/config"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
)

// TestMain fails the package's tests when a goroutine is still running at
// their end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testKey = "app-test-key-0123456789"

// startSim runs a Cloud API simulator with one number until the test ends.
func startSim(t *testing.T) (*sim.Server, string) {
	t.Helper()
	s, err := sim.New(sim.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	url, err := s.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.AddNumber(sim.Number{PhoneNumberID: "555001", AccessToken: "tok-555001",
		Limits: sim.Limits{Rate: 1000, PairInterval: time.Millisecond, PairBurst: 1000}}); err != nil {
		t.Fatal(err)
	}
	return s, url
}

// startApp runs the gateway with its own Cloud API client on a free port
// and a temporary data directory.
func startApp(t *testing.T) *app.App {
	t.Helper()
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.APIKeys = "127.0.0.1:0", t.TempDir(), []string{testKey}
	cfg.ProviderBaseURLs = "http://127.0.0.1" // the simulator, on any port
	a := app.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a
}

func call(t *testing.T, a *app.App, method, path, body string) string {
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
	if res.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	return string(raw)
}

// TestStopLeavesNoGoroutines: once Stop has returned, nothing the gateway
// started runs on, though the provider it sent to is still up: no worker,
// no pipeline partition, no store goroutine, and no connection of its
// Cloud API client kept alive.
func TestStopLeavesNoGoroutines(t *testing.T) {
	s, simURL := startSim(t)
	http.DefaultClient.CloseIdleConnections()
	before := goleak.IgnoreCurrent()
	a := startApp(t)
	call(t, a, "POST", "/v1/accounts", fmt.Sprintf(
		`{"id":"acc","phone_number_id":"555001","access_token":"tok-555001","base_url":%q,"rate_per_sec":50}`, simURL))
	call(t, a, "POST", "/v1/messages", `{"biz_type":"t","account_id":"acc","client_seq":1,"to":"15550001","type":"text","text":{"body":"hi"}}`)
	testwait.For(t, "the message to reach the provider", 30*time.Second, func() bool {
		return s.Stats().Totals.Accepted >= 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	http.DefaultClient.CloseIdleConnections() // the test's own connection to the API
	goleak.VerifyNone(t, before)
}
