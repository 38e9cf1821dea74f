package local_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/stream"
	"github.com/wamux/wamux/stream/local"
	"github.com/wamux/wamux/stream/streamtest"
)

func TestConformance(t *testing.T) {
	streamtest.Run(t, func(t *testing.T, partitions int) func(*testing.T) stream.Log {
		path := filepath.Join(t.TempDir(), "stream.db")
		return func(t *testing.T) stream.Log {
			l, err := local.Open(context.Background(), path, local.Config{Partitions: partitions, MaxBatch: 7})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			return l
		}
	})
}

func TestOpenWithOtherPartitionCountFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stream.db")
	l, err := local.Open(context.Background(), path, local.Config{Partitions: 4})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	_, err = local.Open(context.Background(), path, local.Config{Partitions: 8})
	if wamux.ErrorCode(err) != wamux.EInvalid {
		t.Fatalf("reopen with 8 partitions: %v, want an %s error", err, wamux.EInvalid)
	}
}

func TestCloseEndsConsume(t *testing.T) {
	l, err := local.Open(context.Background(), filepath.Join(t.TempDir(), "stream.db"), local.Config{Partitions: 2})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	assigned := make(chan struct{})
	revoked := make(chan []int32, 1)
	done := make(chan error, 1)
	go func() {
		done <- l.Consume(context.Background(), stream.Funcs{
			OnAssigned: func(context.Context, []int32) { close(assigned) },
			OnRevoked:  func(_ context.Context, ps []int32) { revoked <- ps },
		})
	}()
	<-assigned
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Consume after Close: %v", err)
	}
	if ps := <-revoked; len(ps) != 2 {
		t.Errorf("revoked %v at Close, want both partitions", ps)
	}
	if err := l.Append(context.Background(), []stream.Record{{Key: "a"}}); !errors.Is(err, stream.ErrClosed) {
		t.Errorf("append after Close: %v, want ErrClosed", err)
	}
	if err := l.Close(); !errors.Is(err, stream.ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
}
