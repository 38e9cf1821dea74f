package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/wamux/wamux/app"
	"github.com/wamux/wamux/config"
)

// runServe runs the gateway until ctx is cancelled (SIGINT/SIGTERM), then
// drains within the configured bound and returns 0. A gateway that lost
// its claim on the store (another process took it) stops the same way
// and returns 1.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := config.Load(args, os.Getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "wamux serve: %v\n", err)
		return 2
	}
	if err := cfg.CheckSecretKey(); err != nil {
		fmt.Fprintf(stderr, "wamux serve: %v\n", err)
		return 2
	}
	log := newLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	if cfg.SecretKey == "" {
		log.Warn("--insecure-dev: no WAMUX_SECRET_KEY; secrets at rest are sealed with a key kept in the data directory, beside the data it protects",
			"key_file", filepath.Join(cfg.DataDir, app.SecretKeyFile))
	}
	// SIGHUP re-reads the config file's settings; a bad file is
	// logged and changes nothing. Caught from here on, so an early HUP
	// does not end the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	a := app.New(cfg, log)
	if err := a.Start(ctx); err != nil {
		log.Error("start failed", "err", err)
		return 1
	}
	// Tests and scripts read this line to find the port when listening on :0.
	fmt.Fprintf(stdout, "wamux: listening on http://%s\n", a.Addr())
	var lost error
	for ctx.Err() == nil && lost == nil {
		select {
		case <-ctx.Done():
		case lost = <-a.Fatal():
			// Another process took the store over; the dispatcher has
			// already stopped sending. Stop the rest and exit non-zero.
			log.Error("stopping: this gateway no longer owns its store", "err", lost)
		case <-hup:
			if err := a.Reload(ctx); err != nil {
				log.Error("reload on SIGHUP failed; settings unchanged", "err", err)
			}
		}
	}
	log.Info("shutting down", "bound", time.Duration(cfg.ShutdownTimeout))
	stopCtx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.ShutdownTimeout))
	defer cancel()
	if err := a.Stop(stopCtx); err != nil {
		log.Error("shutdown incomplete", "err", err)
		return 1
	}
	if lost != nil {
		return 1
	}
	return 0
}

func newLogger(w io.Writer, format, level string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
