package app

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/wamux/wamux/config"
)

// TestServerBoundsEveryPhase: a client that trickles its headers or body,
// never reads the answer or keeps an idle connection holds a goroutine and
// a socket; every phase of a connection has a bound, and the whole
// exchange (WriteTimeout counts from the end of the headers) outlasts
// reading a body and a handler's own store timeout, so no slow but honest
// request is cut.
func TestServerBoundsEveryPhase(t *testing.T) {
	cfg := config.Default()
	cfg.Listen, cfg.DataDir = "127.0.0.1:0", t.TempDir()
	a := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Stop(context.Background()) })
	s := a.server
	for name, d := range map[string]time.Duration{"ReadHeaderTimeout": s.ReadHeaderTimeout, "ReadTimeout": s.ReadTimeout,
		"WriteTimeout": s.WriteTimeout, "IdleTimeout": s.IdleTimeout} {
		if d <= 0 {
			t.Errorf("%s is not set: a client can hold a connection for ever", name)
		}
	}
	if s.ReadHeaderTimeout > s.ReadTimeout {
		t.Errorf("ReadHeaderTimeout %s > ReadTimeout %s", s.ReadHeaderTimeout, s.ReadTimeout)
	}
	const handlerBound = 10 * time.Second // httpapi's default store timeout
	if s.WriteTimeout < s.ReadTimeout+handlerBound {
		t.Errorf("WriteTimeout %s would cut a request that reads its body in ReadTimeout %s and then works %s",
			s.WriteTimeout, s.ReadTimeout, handlerBound)
	}
}
