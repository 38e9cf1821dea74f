package fakeclock_test

import (
	"slices"
	"testing"
	"time"

	"github.com/wamux/wamux/internal/fakeclock"
)

func TestNowMovesOnlyWhenAdvanced(t *testing.T) {
	c := fakeclock.New()
	if got := c.Now(); !got.Equal(fakeclock.Epoch) {
		t.Fatalf("Now = %v, want Epoch %v", got, fakeclock.Epoch)
	}
	if got := c.Advance(time.Minute); !got.Equal(fakeclock.Epoch.Add(time.Minute)) {
		t.Fatalf("Advance returned %v", got)
	}
	c.Advance(-time.Hour)
	if got, want := c.Now(), fakeclock.Epoch.Add(-59*time.Minute); !got.Equal(want) {
		t.Fatalf("after moving back Now = %v, want %v", got, want)
	}
	if got := c.Since(fakeclock.Epoch); got != -59*time.Minute {
		t.Fatalf("Since(Epoch) = %v", got)
	}
}

func TestTimersFireInDeadlineOrderAtTheirDeadline(t *testing.T) {
	c := fakeclock.New()
	var fired []string
	var at []time.Duration
	record := func(name string) func() {
		return func() {
			fired = append(fired, name)
			at = append(at, c.Since(fakeclock.Epoch))
		}
	}
	c.AfterFunc(3*time.Second, record("c"))
	c.AfterFunc(time.Second, record("a"))
	c.AfterFunc(2*time.Second, record("b1"))
	c.AfterFunc(2*time.Second, record("b2"))
	c.AfterFunc(5*time.Second, record("late"))
	c.Advance(4 * time.Second)
	if want := []string{"a", "b1", "b2", "c"}; !slices.Equal(fired, want) {
		t.Fatalf("fired %v, want %v", fired, want)
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 2 * time.Second, 3 * time.Second}; !slices.Equal(at, want) {
		t.Fatalf("fired at %v, want %v", at, want)
	}
	if got := c.Since(fakeclock.Epoch); got != 4*time.Second {
		t.Fatalf("clock at %v after Advance(4s)", got)
	}
	if n := c.Pending(); n != 1 {
		t.Fatalf("Pending = %d, want 1", n)
	}
}

func TestAfterAndTimer(t *testing.T) {
	c := fakeclock.New()
	ch := c.After(time.Second)
	select {
	case <-ch:
		t.Fatal("After fired before its time")
	default:
	}
	c.Advance(999 * time.Millisecond)
	select {
	case <-ch:
		t.Fatal("After fired early")
	default:
	}
	c.Advance(time.Millisecond)
	select {
	case got := <-ch:
		if !got.Equal(fakeclock.Epoch.Add(time.Second)) {
			t.Fatalf("After sent %v", got)
		}
	default:
		t.Fatal("After did not fire at its deadline")
	}

	tm := c.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of an armed timer reported false")
	}
	if tm.Stop() {
		t.Fatal("second Stop reported true")
	}
	c.Advance(time.Hour)
	select {
	case <-tm.C:
		t.Fatal("a stopped timer fired")
	default:
	}

	// A value sent before Reset is not received after it.
	tm.Reset(time.Second)
	c.Advance(time.Second)
	tm.Reset(time.Second)
	select {
	case <-tm.C:
		t.Fatal("a stale value survived Reset")
	default:
	}
	c.Advance(time.Second)
	<-tm.C
}

func TestZeroDurationFiresOnNextAdvance(t *testing.T) {
	c := fakeclock.New()
	ch := c.After(0)
	c.Advance(0)
	select {
	case <-ch:
	default:
		t.Fatal("After(0) did not fire on Advance(0)")
	}
}

func TestTicker(t *testing.T) {
	c := fakeclock.New()
	tk := c.NewTicker(time.Second)
	defer tk.Stop()
	for i := 1; i <= 3; i++ {
		c.Advance(time.Second)
		got := <-tk.C
		if want := fakeclock.Epoch.Add(time.Duration(i) * time.Second); !got.Equal(want) {
			t.Fatalf("tick %d at %v, want %v", i, got, want)
		}
	}
	// Ticks nobody reads are dropped; a long Advance leaves one.
	c.Advance(time.Hour)
	<-tk.C
	select {
	case <-tk.C:
		t.Fatal("more than one tick buffered")
	default:
	}
	c.Advance(time.Second)
	<-tk.C

	tk.Reset(time.Minute)
	c.Advance(59 * time.Second)
	select {
	case <-tk.C:
		t.Fatal("ticker fired before its new period")
	default:
	}
	c.Advance(time.Second)
	<-tk.C
	tk.Stop()
	if n := c.Pending(); n != 0 {
		t.Fatalf("Pending = %d after Stop", n)
	}
}

func TestSetFiresWhatFallsDue(t *testing.T) {
	c := fakeclock.New()
	fired := false
	c.AfterFunc(time.Minute, func() { fired = true })
	c.Set(fakeclock.Epoch.Add(time.Hour))
	if !fired {
		t.Fatal("Set past a deadline did not fire it")
	}
	if got := c.Now(); !got.Equal(fakeclock.Epoch.Add(time.Hour)) {
		t.Fatalf("Now = %v after Set", got)
	}
}

func TestAdvanceFromAnotherGoroutine(t *testing.T) {
	c := fakeclock.New()
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-c.After(time.Minute)
	}()
	for c.Pending() == 0 {
		time.Sleep(time.Millisecond) // the goroutine arms its timer
	}
	c.Advance(time.Minute)
	<-done
}
