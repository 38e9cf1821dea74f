package testwait_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wamux/wamux/internal/testwait"
)

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	testwait.For(t, "three polls", time.Minute, func() bool { return n.Add(1) == 3 })
	if got := n.Load(); got != 3 {
		t.Fatalf("polled %d times, want 3", got)
	}
}

func TestForNilReturnsOnceCheckPasses(t *testing.T) {
	var n atomic.Int32
	testwait.ForNil(t, time.Minute, func() error {
		if n.Add(1) < 3 {
			return errors.New("not yet")
		}
		return nil
	})
}

// recorder is a testing.TB that records Fatalf instead of ending the test.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = strings.TrimSpace(fmt.Sprintf(format, args...))
	panic(r)
}

func failure(f func(tb testing.TB)) (msg string) {
	r := &recorder{}
	defer func() {
		if p := recover(); p != r {
			panic(p)
		}
		msg = r.msg
	}()
	f(r)
	return ""
}

func TestForFailsAtTheDeadlineNamingWhat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		msg := failure(func(tb testing.TB) {
			testwait.For(tb, "the moon", time.Second, func() bool { return false })
		})
		if want := "timed out after 1s waiting for the moon"; msg != want {
			t.Fatalf("message %q, want %q", msg, want)
		}
		if waited := time.Since(start); waited < time.Second || waited > time.Second+100*time.Millisecond {
			t.Fatalf("gave up after %v, want about 1s", waited)
		}
	})
}

func TestForNilFailsWithTheLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		msg := failure(func(tb testing.TB) {
			testwait.ForNil(tb, time.Second, func() error {
				n++
				return errors.New("still " + strings.Repeat("x", n%2+1))
			})
		})
		if !strings.HasPrefix(msg, "timed out after 1s: still x") {
			t.Fatalf("message %q", msg)
		}
	})
}
