package app_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/wamux/wamux/app"
	"github.com/wamux/wamux/config"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/store"
	"github.com/wamux/wamux/store/sqlite"
)

// TestInboundRetentionRunsFromStart: the gateway deletes inbound messages
// older than inbound_retention (30 days by default) from its start on,
// and keeps the younger ones.
func TestInboundRetentionRunsFromStart(t *testing.T) {
	cfg := config.Default()
	cfg.Listen, cfg.DataDir, cfg.APIKeys = "127.0.0.1:0", t.TempDir(), []string{testKey}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(cfg.DataDir, app.SQLiteFile), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	old, young := time.Now().Add(-31*24*time.Hour), time.Now().Add(-29*24*time.Hour)
	if _, err := st.AddInboundMessages(ctx, []store.InboundMessage{
		{AccountID: "acc", WAMID: "wamid.OLD", Type: "text", From: "1", SentAt: old, ReceivedAt: old},
		{AccountID: "acc", WAMID: "wamid.YOUNG", Type: "text", From: "1", SentAt: young, ReceivedAt: young},
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	a := app.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	var left []store.InboundMessage
	testwait.For(t, "the old inbound message deleted", 10*time.Second, func() bool {
		left, _, err = a.Store().ListInbound(ctx, store.InboundFilter{AccountID: "acc"})
		return err == nil && len(left) == 1
	})
	if left[0].WAMID != "wamid.YOUNG" {
		t.Fatalf("kept %s, want wamid.YOUNG", left[0].WAMID)
	}
}
