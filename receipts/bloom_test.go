package receipts

import (
	"fmt"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/store"
)

func newTestBloom(t testing.TB, cfg BloomConfig) *Bloom {
	t.Helper()
	b, err := NewBloom(cfg)
	if err != nil {
		t.Fatalf("NewBloom(%+v): %v", cfg, err)
	}
	return b
}

// accurate is a config whose false positives, for the few keys a test adds,
// are far too rare to ever show up.
func accurate(clock *fakeclock.Clock) BloomConfig {
	return BloomConfig{ExpectedPerHour: 1000, FalsePositiveRate: 1e-9, Now: clock.Now}
}

func rkey(acc, msg string, typ wamux.ReceiptType) store.ReceiptKey {
	return store.ReceiptKey{AccountID: acc, MessageID: msg, Type: typ}
}

func TestBloomAddThenMayContain(t *testing.T) {
	b := newTestBloom(t, accurate(fakeclock.NewAt(t0)))
	k := rkey("acc", "m1", wamux.ReceiptRead)
	if b.MayContain(k, t0) {
		t.Fatal("empty filter may contain a key")
	}
	b.Add(k, t0)
	if !b.MayContain(k, t0) {
		t.Fatal("added key not found")
	}
	for _, other := range []store.ReceiptKey{
		rkey("acc", "m1", wamux.ReceiptDelivered),
		rkey("acc2", "m1", wamux.ReceiptRead),
		rkey("acc", "m2", wamux.ReceiptRead),
		// Same bytes if fields were simply concatenated.
		rkey("ac", "cm1", wamux.ReceiptRead),
	} {
		if b.MayContain(other, t0) {
			t.Errorf("key %+v found after adding only %+v", other, k)
		}
	}
}

// TestBloomWindow walks the 48 h window: a key added at hour 0 is there
// through hour 47 and gone from hour 48 on.
func TestBloomWindow(t *testing.T) {
	b := newTestBloom(t, accurate(fakeclock.NewAt(t0)))
	k := rkey("acc", "m1", wamux.ReceiptSent)
	at := t0.Add(30 * time.Minute)
	b.Add(k, at)
	for _, tc := range []struct {
		after time.Duration
		want  bool
	}{
		{-time.Hour, false}, // a window ending before the key's hour
		{0, true},
		{47 * time.Hour, true},
		{48*time.Hour - 30*time.Minute - time.Nanosecond, true}, // last instant of hour 47
		{48*time.Hour - 30*time.Minute, false},                  // hour 48 starts
		{100 * time.Hour, false},
	} {
		if got := b.MayContain(k, at.Add(tc.after)); got != tc.want {
			t.Errorf("MayContain %v after adding = %v, want %v", tc.after, got, tc.want)
		}
	}
}

// TestBloomRotation reuses a slot: adding at hour 48 clears what hour 0
// held, and a late add for hour 0 no longer lands anywhere.
func TestBloomRotation(t *testing.T) {
	b := newTestBloom(t, accurate(fakeclock.NewAt(t0)))
	old, fresh, stale := rkey("acc", "old", wamux.ReceiptSent), rkey("acc", "fresh", wamux.ReceiptSent), rkey("acc", "stale", wamux.ReceiptSent)
	b.Add(old, t0)
	b.Add(fresh, t0.Add(BloomHours*time.Hour))
	if b.MayContain(old, t0) {
		t.Fatal("hour 0's key survived its slot's reuse by hour 48")
	}
	if !b.MayContain(fresh, t0.Add(BloomHours*time.Hour)) {
		t.Fatal("hour 48's key not found")
	}
	b.Add(stale, t0)
	if b.MayContain(stale, t0) || b.MayContain(stale, t0.Add(BloomHours*time.Hour)) {
		t.Fatal("a key for an hour already rotated out was recorded")
	}
	if !b.MayContain(fresh, t0.Add(BloomHours*time.Hour)) {
		t.Fatal("the stale add cleared hour 48's key")
	}
}

func TestBloomHourOf(t *testing.T) {
	for _, tc := range []struct {
		t    time.Time
		want int64
	}{
		{time.Unix(0, 0), 0},
		{time.Unix(3599, 999), 0},
		{time.Unix(3600, 0), 1},
		{time.Unix(-1, 0), -1},
		{time.Unix(-3600, 0), -1},
		{time.Unix(-3601, 0), -2},
	} {
		if got := hourOf(tc.t); got != tc.want {
			t.Errorf("hourOf(%d) = %d, want %d", tc.t.Unix(), got, tc.want)
		}
	}
	if got := slot(-1); got != BloomHours-1 {
		t.Errorf("slot(-1) = %d, want %d", got, BloomHours-1)
	}
}

func TestBloomConfig(t *testing.T) {
	for _, rate := range []float64{-0.1, 1, 1.5} {
		if _, err := NewBloom(BloomConfig{FalsePositiveRate: rate}); err == nil {
			t.Errorf("NewBloom accepted false-positive rate %v", rate)
		}
	}
	b := newTestBloom(t, BloomConfig{})
	// The documented size: 28 MB with the defaults.
	if mb := b.m * 8 / 1_000_000; mb != 28 {
		t.Errorf("default window takes %d MB, documented 28", mb)
	}
	if !b.Enabled() {
		t.Error("Bloom layer off by default")
	}
	if newTestBloom(t, BloomConfig{Disabled: true}).Enabled() {
		t.Error("Disabled config started the layer on")
	}
}

// TestBloomFalsePositiveRate checks that the configured rate is about what
// one gets over a full window, so the sizing in the docs holds.
func TestBloomFalsePositiveRate(t *testing.T) {
	const perHour, rate = 200, 0.05
	b := newTestBloom(t, BloomConfig{ExpectedPerHour: perHour, FalsePositiveRate: rate})
	for h := range BloomHours {
		for i := range perHour {
			b.Add(rkey("acc", fmt.Sprint(h, "-", i), wamux.ReceiptSent), t0.Add(time.Duration(h)*time.Hour))
		}
	}
	const probes = 20000
	end := t0.Add((BloomHours - 1) * time.Hour)
	fp := 0
	for i := range probes {
		if b.MayContain(rkey("acc", fmt.Sprint("never-", i), wamux.ReceiptSent), end) {
			fp++
		}
	}
	got := float64(fp) / probes
	t.Logf("false-positive rate over the window = %.4f, configured %.4f", got, rate)
	if got > 2*rate || got < rate/4 {
		t.Fatalf("false-positive rate over the window = %.4f, configured %.4f", got, rate)
	}
}

// MemoryBytes tells an operator what a size costs: what the filter
// really allocates, ~141 bytes a key at the default rate.
func TestBloomMemoryBytes(t *testing.T) {
	for _, n := range []uint{1000, BloomExpectedPerHourDefault} {
		cfg := BloomConfig{ExpectedPerHour: n, Now: func() time.Time { return time.Unix(0, 0) }}
		b, err := NewBloom(cfg)
		if err != nil {
			t.Fatal(err)
		}
		b.Add(store.ReceiptKey{MessageID: "m", AccountID: "a", Type: "sent"}, time.Unix(0, 0))
		if got, want := cfg.MemoryBytes(), len(b.words)*8; got != want {
			t.Errorf("%d keys: MemoryBytes = %d, the filter allocated %d", n, got, want)
		}
		if per := float64(cfg.MemoryBytes()) / float64(n); per < 130 || per > 150 {
			t.Errorf("%d keys: %.1f bytes a key, want ~141", n, per)
		}
	}
	if (BloomConfig{FalsePositiveRate: 2}).MemoryBytes() != 0 {
		t.Error("an invalid configuration reports memory")
	}
}
