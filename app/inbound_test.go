package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/wamux/wamux/app"
	"github.com/wamux/wamux/config"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/sim"
)

// TestInboundChargedToTheAccountsBucket: the app wires the receipt
// pipeline to the dispatcher, so messages users send to a number, arriving
// by webhook, take tokens from the account's bucket (Meta counts them
// against the number's throughput). The account refills at 1 token in
// 1000 s, so the 5 tokens the webhook takes stay taken.
func TestInboundChargedToTheAccountsBucket(t *testing.T) {
	const secret = "app-test-secret"
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.APIKeys, cfg.AppSecret = "127.0.0.1:0", t.TempDir(), []string{testKey}, secret
	cfg.ProviderBaseURLs = "http://127.0.0.1:1"
	a := app.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	s, err := sim.New(sim.Config{Webhooks: sim.Webhooks{URL: "http://" + a.Addr() + "/webhook", AppSecret: secret}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.AddNumber(sim.Number{PhoneNumberID: "555002", AccessToken: "tok-555002"}); err != nil {
		t.Fatal(err)
	}
	call(t, a, "POST", "/v1/accounts",
		`{"id":"acc","phone_number_id":"555002","access_token":"tok-555002","base_url":"http://127.0.0.1:1","rate_per_sec":0.001,"burst":5}`)
	if tok, ok := a.Dispatcher().Tokens("acc"); !ok || tok < 4.99 {
		t.Fatalf("tokens of a new account = %v, %v; want its burst 5", tok, ok)
	}
	if _, err := s.Inbound("555002", sim.InboundRequest{Count: 5}); err != nil {
		t.Fatal(err)
	}
	testwait.ForNil(t, 30*time.Second, func() error {
		if w := s.Stats().Webhooks; w.Posts < 5 {
			return fmt.Errorf("the inbound webhooks were not answered: %+v", w)
		}
		return nil
	})
	if tok, _ := a.Dispatcher().Tokens("acc"); tok > 0.1 {
		t.Fatalf("tokens after 5 inbound messages = %v; want them charged (about 0)", tok)
	}
}
