package receipts

import (
	"testing"
	"time"

	"github.com/wamux/wamux"
)

// appender is a pipeline with only what collect uses: the calls' channel,
// the stop signal, the hold settings and a load the test decides.
func appender(hold, gap time.Duration, busy func() float64) *Pipeline {
	return &Pipeline{cfg: Config{AppendHold: hold}, appends: make(chan *appendReq, 16), stop: make(chan struct{}),
		busy: busy, appendGap: gap}
}

func call(n int) *appendReq {
	return &appendReq{rs: make([]wamux.Receipt, n), done: make(chan error, 1)}
}

// collectAsync runs collect and hands back its group; a group that does
// not come within a minute fails the test instead of hanging it.
func collectAsync(t *testing.T, p *Pipeline, first *appendReq) func() []*appendReq {
	t.Helper()
	got := make(chan []*appendReq, 1)
	go func() { got <- p.collect(first) }()
	return func() []*appendReq {
		t.Helper()
		select {
		case g := <-got:
			return g
		case <-time.After(time.Minute):
			t.Fatal("collect did not return")
			return nil
		}
	}
}

func TestCollectHoldsTheGroupWhileBusy(t *testing.T) {
	asked := make(chan struct{})
	p := appender(time.Hour, time.Hour, func() float64 { close(asked); return 1 })
	first, second := call(1), call(appendGroupRows-1)
	wait := collectAsync(t, p, first)
	select {
	case <-asked:
	case <-time.After(time.Minute):
		t.Fatal("collect never asked how busy the CPUs are")
	}
	// Sent only once collect found the queue empty: it is in the group
	// only because collect held the group open for it.
	p.appends <- second
	g := wait()
	if len(g) != 2 || g[0] != first || g[1] != second {
		t.Fatalf("group = %d calls, want first and second", len(g))
	}
}

func TestCollectAppendsAtOnceWhenNotBusy(t *testing.T) {
	asked := 0
	p := appender(time.Hour, time.Hour, func() float64 { asked++; return appendBusyShare - 0.01 })
	first := call(1)
	if g := p.collect(first); len(g) != 1 || g[0] != first {
		t.Fatalf("group = %d calls, want first alone", len(g))
	}
	if asked != 1 {
		t.Fatalf("load asked %d times, want 1", asked)
	}
	// What is already queued goes along, busy or not.
	queued := call(3)
	p.appends <- queued
	if g := p.collect(first); len(g) != 2 || g[1] != queued {
		t.Fatalf("group = %d calls, want first and the queued call", len(g))
	}
}

func TestCollectHoldEnds(t *testing.T) {
	busy := func() float64 { return 1 }
	t.Run("gap after the last arrival", func(t *testing.T) {
		p := appender(time.Hour, time.Millisecond, busy)
		first := call(1)
		if g := collectAsync(t, p, first)(); len(g) != 1 || g[0] != first {
			t.Fatalf("group = %d calls, want first alone", len(g))
		}
		// A call that arrives while held starts a new gap, not the hour.
		// (A gap long enough for the call to come in before it ends.)
		asked := make(chan struct{})
		p.busy = func() float64 { close(asked); return 1 }
		p.appendGap = time.Second
		wait := collectAsync(t, p, first)
		<-asked
		second := call(1)
		p.appends <- second
		if g := wait(); len(g) != 2 || g[1] != second {
			t.Fatalf("group = %d calls, want first and second", len(g))
		}
	})
	t.Run("hold in all", func(t *testing.T) {
		p := appender(time.Millisecond, time.Hour, busy)
		if g := collectAsync(t, p, call(1))(); len(g) != 1 {
			t.Fatalf("group = %d calls, want 1", len(g))
		}
	})
	t.Run("stop", func(t *testing.T) {
		p := appender(time.Hour, time.Hour, busy)
		wait := collectAsync(t, p, call(1))
		close(p.stop)
		if g := wait(); len(g) != 1 {
			t.Fatalf("group = %d calls, want 1", len(g))
		}
	})
	t.Run("hold off", func(t *testing.T) {
		p := appender(-1, time.Hour, func() float64 { t.Fatal("load asked with the hold off"); return 1 })
		if g := p.collect(call(1)); len(g) != 1 {
			t.Fatalf("group = %d calls, want 1", len(g))
		}
	})
	t.Run("group full", func(t *testing.T) {
		p := appender(time.Hour, time.Hour, func() float64 { t.Fatal("load asked for a full group"); return 1 })
		if g := p.collect(call(appendGroupRows)); len(g) != 1 {
			t.Fatalf("group = %d calls, want 1", len(g))
		}
	})
}

func TestCPULoad(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now, used, known := t0, 100*time.Millisecond, true
	l := &cpuLoad{now: func() time.Time { return now }, cpu: func() (time.Duration, bool) { return used, known },
		procs: func() int { return 2 }}
	if got := l.busy(); got != 0 {
		t.Fatalf("first sample: %v, want 0", got)
	}
	// Within the window: no new sample, the last share (none yet).
	now, used = now.Add(loadWindow/2), used+loadWindow
	if got := l.busy(); got != 0 {
		t.Fatalf("inside the window: %v, want 0", got)
	}
	// 40 ms of wall time on 2 CPUs, 60 ms of CPU time: 0.75.
	now, used = t0.Add(40*time.Millisecond), 160*time.Millisecond
	if got := l.busy(); got != 0.75 {
		t.Fatalf("busy = %v, want 0.75", got)
	}
	// The share holds until the next window ends.
	now, used = now.Add(time.Millisecond), used+time.Second
	if got := l.busy(); got != 0.75 {
		t.Fatalf("inside the next window: %v, want 0.75", got)
	}
	// The next sample covers everything since the last one: 100 ms, the
	// second above and 1 ms more.
	now, used = t0.Add(140*time.Millisecond), used+time.Millisecond
	if got, want := l.busy(), float64(time.Second+time.Millisecond)/float64(2*100*time.Millisecond); got != want {
		t.Fatalf("busy = %v, want %v", got, want)
	}
	known = false
	now = now.Add(time.Second)
	if got := l.busy(); got != 0 {
		t.Fatalf("CPU time unknown: %v, want 0", got)
	}
}
