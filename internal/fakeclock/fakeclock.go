// Package fakeclock is a clock for tests that moves only when the test moves
// it. It tells the time (Now) and runs timers, tickers and After channels;
// Advance fires the timers that fall due, in the order of their deadlines,
// before it returns, so a test decides exactly what has happened by when.
package fakeclock

import (
	"sync"
	"time"
)

// Epoch is where New starts: a fixed instant, so failures reproduce.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is a manually moved clock, safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64 // arming order: the tie-break between equal deadlines
	pending map[*timer]struct{}
}

// New returns a Clock at Epoch.
func New() *Clock { return NewAt(Epoch) }

// NewAt returns a Clock at start.
func NewAt(start time.Time) *Clock {
	return &Clock{now: start, pending: make(map[*timer]struct{})}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Since returns the time elapsed on the clock since t.
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Pending returns how many timers, tickers and After channels are armed: a
// test waits for a goroutine to start waiting on the clock before it
// advances past the goroutine's deadline.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// Advance moves the clock forward by d and returns the new time. Every timer
// whose deadline is reached fires in deadline order (equal deadlines in the
// order they were armed), with the clock standing at that deadline while it
// fires. A ticker fires at each period boundary passed; a tick its reader
// has not made room for is dropped, as with time.Ticker. AfterFunc functions
// run on the caller's goroutine before Advance returns. A negative d moves
// the clock back.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for c.fireNext(target) {
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d < 0 || c.now.Before(target) {
		c.now = target
	}
	return c.now
}

// Set moves the clock to t, forward or back, firing what falls due as
// Advance does.
func (c *Clock) Set(t time.Time) { c.Advance(t.Sub(c.Now())) }

// fireNext fires the earliest timer due at or before target and reports
// whether there was one.
func (c *Clock) fireNext(target time.Time) bool {
	c.mu.Lock()
	var next *timer
	for t := range c.pending {
		if t.when.After(target) {
			continue
		}
		if next == nil || t.when.Before(next.when) || t.when.Equal(next.when) && t.seq < next.seq {
			next = t
		}
	}
	if next == nil {
		c.mu.Unlock()
		return false
	}
	at := next.when
	if at.After(c.now) {
		c.now = at
	}
	if next.period > 0 {
		next.when = at.Add(next.period)
		if len(next.ch) == cap(next.ch) && !next.when.After(target) {
			// Nobody took the last tick: skip the boundaries up to
			// target, whose ticks would all be dropped.
			next.when = at.Add(next.period * (target.Sub(at)/next.period + 1))
		}
		c.seq++
		next.seq = c.seq
	} else {
		delete(c.pending, next)
	}
	ch, fn := next.ch, next.fn
	c.mu.Unlock()
	if fn != nil {
		fn()
	} else {
		select {
		case ch <- at:
		default: // a ticker's reader fell behind: the tick is dropped, as with time.Ticker
		}
	}
	return true
}

// timer is one armed deadline; a Timer, a Ticker and After share it.
type timer struct {
	c      *Clock
	when   time.Time
	seq    uint64
	period time.Duration // > 0 for a ticker
	ch     chan time.Time
	fn     func()
}

// arm schedules t to fire d from now; the caller holds c.mu. A d of zero or
// less fires on the next Advance, even Advance(0).
func (c *Clock) arm(t *timer, d time.Duration) {
	t.when = c.now.Add(max(d, 0))
	c.seq++
	t.seq = c.seq
	c.pending[t] = struct{}{}
}

// disarm stops t and empties its channel, so no value sent before a Stop or
// Reset is received after it (the semantics of time.Timer since Go 1.23). It
// reports whether t was armed.
func (c *Clock) disarm(t *timer) bool {
	_, armed := c.pending[t]
	delete(c.pending, t)
	if t.ch != nil {
		select {
		case <-t.ch:
		default:
		}
	}
	return armed
}

// After returns a channel that receives the clock's time once d has passed.
func (c *Clock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C }

// Timer is the counterpart of time.Timer.
type Timer struct {
	C <-chan time.Time
	t *timer
}

// NewTimer returns a Timer that sends the time on C once d has passed.
func (c *Clock) NewTimer(d time.Duration) *Timer {
	t := &timer{c: c, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	c.arm(t, d)
	c.mu.Unlock()
	return &Timer{C: t.ch, t: t}
}

// AfterFunc calls f on the goroutine that advances the clock past d.
func (c *Clock) AfterFunc(d time.Duration, f func()) *Timer {
	t := &timer{c: c, fn: f}
	c.mu.Lock()
	c.arm(t, d)
	c.mu.Unlock()
	return &Timer{t: t}
}

// Stop prevents the timer from firing and reports whether it was armed.
func (t *Timer) Stop() bool {
	c := t.t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.disarm(t.t)
}

// Reset rearms the timer to fire d from now and reports whether it was
// armed.
func (t *Timer) Reset(d time.Duration) bool {
	c := t.t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	armed := c.disarm(t.t)
	c.arm(t.t, d)
	return armed
}

// Ticker is the counterpart of time.Ticker.
type Ticker struct {
	C <-chan time.Time
	t *timer
}

// NewTicker returns a Ticker that sends the time on C every d; d must be
// positive.
func (c *Clock) NewTicker(d time.Duration) *Ticker {
	if d <= 0 {
		panic("fakeclock: non-positive interval for NewTicker")
	}
	t := &timer{c: c, period: d, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	c.arm(t, d)
	c.mu.Unlock()
	return &Ticker{C: t.ch, t: t}
}

// Stop turns the ticker off.
func (t *Ticker) Stop() {
	c := t.t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.disarm(t.t)
}

// Reset stops the ticker and restarts it with period d; d must be positive.
func (t *Ticker) Reset(d time.Duration) {
	if d <= 0 {
		panic("fakeclock: non-positive interval for Ticker.Reset")
	}
	c := t.t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.disarm(t.t)
	t.t.period = d
	c.arm(t.t, d)
}
