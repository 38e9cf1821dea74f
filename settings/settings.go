// Package settings holds the runtime settings that change without a restart
// (GET/PATCH /v1/config): they live in the store, are validated as a whole
// before anything is written, and reach the running pipelines through an
// atomically swapped snapshot that every loop reads on each iteration.
package settings

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wamux/wamux"
)

// Values is one consistent snapshot of every runtime setting.
type Values struct {
	GapTimeout   time.Duration // a missing client_seq is skipped after this
	LateWindow   time.Duration // receipts older than this against the state go to audit
	QuietPeriod  time.Duration // wait this long for a status before resending an unknown outcome
	P2MaxAge     time.Duration // P2 messages queued longer are shed
	P2MaxDepth   int           // P2 messages queued per account beyond this are shed
	MaxAttempts  int           // provider attempts before a message fails
	BackoffBase  time.Duration // first retry delay (full jitter)
	BackoffCap   time.Duration // largest retry delay
	CooldownMin  time.Duration // first account cooldown after repeated 429s
	CooldownMax  time.Duration // longest account cooldown
	PairInterval time.Duration // one message per recipient per interval after the burst
	PairBurst    int           // messages a quiet recipient may get at once
	Bloom        bool          // receipts: Bloom layer on (off: every key checked in the store)
	Ordering     bool          // outbound: client_seq ordering on (off: dedup only)
	ApplyState   bool          // receipts: merge into current status now (off: store, apply later)

	EventRetention   time.Duration // events are kept this long (feed cursors, replay)
	EventRetryWindow time.Duration // a delivery failing this long marks its subscription failing
	InboundRetention time.Duration // inbound messages are kept this long
	ServiceWindow    string        // "enforce": refuse free-form sends outside the 24 h window; "off"

	QueueMaxDepth   int           // queued messages per account beyond this are refused at submit (429)
	QueueMaxBacklog time.Duration // refused too when the queue would take longer than this to drain at the account's rate
	QueueMemoryMiB  int           // estimated memory of queued messages, all accounts together, beyond this is refused
	QueueWindow     int           // queued messages per account held in memory; the rest wait in the store and are loaded in order
	KeyRate         int           // requests per second one API key may make (token bucket)
	KeyBurst        int           // requests one API key may make at once
}

// Service window modes (Values.ServiceWindow).
const (
	ServiceWindowEnforce = "enforce"
	ServiceWindowOff     = "off"
)

// Defaults are the settings of a fresh gateway (DESIGN.md).
func Defaults() Values {
	return Values{
		GapTimeout:   5 * time.Minute,
		LateWindow:   5 * time.Minute,
		QuietPeriod:  30 * time.Second,
		P2MaxAge:     10 * time.Minute,
		P2MaxDepth:   10000,
		MaxAttempts:  8,
		BackoffBase:  time.Second,
		BackoffCap:   60 * time.Second,
		CooldownMin:  30 * time.Second,
		CooldownMax:  2 * time.Minute,
		PairInterval: 6 * time.Second,
		PairBurst:    3,
		Bloom:        true,
		Ordering:     true,
		ApplyState:   true,

		EventRetention:   7 * 24 * time.Hour,
		EventRetryWindow: 72 * time.Hour,
		InboundRetention: 30 * 24 * time.Hour,
		ServiceWindow:    ServiceWindowEnforce,

		QueueMaxDepth:   50_000,
		QueueMaxBacklog: time.Hour,
		QueueMemoryMiB:  256,
		QueueWindow:     2000,
		KeyRate:         1000,
		KeyBurst:        2000,
	}
}

type field struct {
	get func(*Values) string
	set func(*Values, string) error
}

func durationField(p func(*Values) *time.Duration, lo, hi time.Duration) field {
	return field{
		get: func(v *Values) string { return p(v).String() },
		set: func(v *Values, s string) error {
			d, err := time.ParseDuration(s)
			if err != nil {
				return fmt.Errorf("must be a Go duration such as \"30s\"")
			}
			if d < lo || d > hi {
				return fmt.Errorf("must be between %s and %s", lo, hi)
			}
			*p(v) = d
			return nil
		},
	}
}

func intField(p func(*Values) *int, lo, hi int) field {
	return field{
		get: func(v *Values) string { return strconv.Itoa(*p(v)) },
		set: func(v *Values, s string) error {
			n, err := strconv.Atoi(s)
			if err != nil || n < lo || n > hi {
				return fmt.Errorf("must be a whole number between %d and %d", lo, hi)
			}
			*p(v) = n
			return nil
		},
	}
}

func boolField(p func(*Values) *bool) field {
	return field{
		get: func(v *Values) string { return strconv.FormatBool(*p(v)) },
		set: func(v *Values, s string) error {
			// Only the words: strconv.ParseBool would also take 0, 1, t
			// and f, so a number sent for a switch would flip it.
			switch strings.ToLower(s) {
			case "true":
				*p(v) = true
			case "false":
				*p(v) = false
			default:
				return fmt.Errorf("must be true or false")
			}
			return nil
		},
	}
}

func choiceField(p func(*Values) *string, choices ...string) field {
	return field{
		get: func(v *Values) string { return *p(v) },
		set: func(v *Values, s string) error {
			for _, c := range choices {
				if s == c {
					*p(v) = c
					return nil
				}
			}
			return fmt.Errorf("must be one of %s", strings.Join(choices, ", "))
		},
	}
}

// fields is the table of settings: the key as the API and store spell it,
// and its bounds. Bounds keep an operator's typo at 3 a.m. from stalling
// the gateway (a 0s quiet period would resend everything at once).
var fields = map[string]field{
	"gap_timeout":   durationField(func(v *Values) *time.Duration { return &v.GapTimeout }, 0, 24*time.Hour),
	"late_window":   durationField(func(v *Values) *time.Duration { return &v.LateWindow }, time.Second, 7*24*time.Hour),
	"quiet_period":  durationField(func(v *Values) *time.Duration { return &v.QuietPeriod }, 100*time.Millisecond, time.Hour),
	"p2_max_age":    durationField(func(v *Values) *time.Duration { return &v.P2MaxAge }, time.Second, 7*24*time.Hour),
	"p2_max_depth":  intField(func(v *Values) *int { return &v.P2MaxDepth }, 1, 10_000_000),
	"max_attempts":  intField(func(v *Values) *int { return &v.MaxAttempts }, 1, 100),
	"backoff_base":  durationField(func(v *Values) *time.Duration { return &v.BackoffBase }, time.Millisecond, time.Hour),
	"backoff_cap":   durationField(func(v *Values) *time.Duration { return &v.BackoffCap }, time.Millisecond, 24*time.Hour),
	"cooldown_min":  durationField(func(v *Values) *time.Duration { return &v.CooldownMin }, time.Millisecond, 24*time.Hour),
	"cooldown_max":  durationField(func(v *Values) *time.Duration { return &v.CooldownMax }, time.Millisecond, 24*time.Hour),
	"pair_interval": durationField(func(v *Values) *time.Duration { return &v.PairInterval }, time.Millisecond, time.Hour),
	"pair_burst":    intField(func(v *Values) *int { return &v.PairBurst }, 1, 1000),
	"bloom":         boolField(func(v *Values) *bool { return &v.Bloom }),
	"ordering":      boolField(func(v *Values) *bool { return &v.Ordering }),
	"apply_state":   boolField(func(v *Values) *bool { return &v.ApplyState }),

	"event_retention":    durationField(func(v *Values) *time.Duration { return &v.EventRetention }, time.Hour, 90*24*time.Hour),
	"event_retry_window": durationField(func(v *Values) *time.Duration { return &v.EventRetryWindow }, time.Minute, 30*24*time.Hour),
	"inbound_retention":  durationField(func(v *Values) *time.Duration { return &v.InboundRetention }, time.Hour, 365*24*time.Hour),
	"service_window":     choiceField(func(v *Values) *string { return &v.ServiceWindow }, ServiceWindowEnforce, ServiceWindowOff),

	"queue_max_depth":   intField(func(v *Values) *int { return &v.QueueMaxDepth }, 10, 10_000_000),
	"queue_max_backlog": durationField(func(v *Values) *time.Duration { return &v.QueueMaxBacklog }, time.Second, 7*24*time.Hour),
	"queue_memory_mib":  intField(func(v *Values) *int { return &v.QueueMemoryMiB }, 1, 1<<20),
	"queue_window":      intField(func(v *Values) *int { return &v.QueueWindow }, 10, 1_000_000),
	"key_rate":          intField(func(v *Values) *int { return &v.KeyRate }, 1, 1_000_000),
	"key_burst":         intField(func(v *Values) *int { return &v.KeyBurst }, 1, 1_000_000),
}

// Keys lists every setting, sorted.
func Keys() []string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Map renders v as key → text, the form the store and the API use.
func (v Values) Map() map[string]string {
	m := make(map[string]string, len(fields))
	for k, f := range fields {
		m[k] = f.get(&v)
	}
	return m
}

// Apply returns v with the changes applied, or an EInvalid naming the first
// unknown key or bad value; v itself is never modified.
func (v Values) Apply(changes map[string]string) (Values, error) {
	next := v
	for _, k := range sortedKeys(changes) {
		f, ok := fields[k]
		if !ok {
			return v, wamux.Errorf(wamux.EInvalid, "unknown setting %q", k)
		}
		if err := f.set(&next, changes[k]); err != nil {
			return v, wamux.Errorf(wamux.EInvalid, "setting %s: %v", k, err)
		}
	}
	if next.BackoffBase > next.BackoffCap {
		return v, wamux.Errorf(wamux.EInvalid, "backoff_base (%s) must not exceed backoff_cap (%s)", next.BackoffBase, next.BackoffCap)
	}
	if next.CooldownMin > next.CooldownMax {
		return v, wamux.Errorf(wamux.EInvalid, "cooldown_min (%s) must not exceed cooldown_max (%s)", next.CooldownMin, next.CooldownMax)
	}
	return next, nil
}

// Check reports the first unknown key or bad value of changes, each taken
// on its own: what Apply checks except the bounds that depend on another
// setting (backoff_base ≤ backoff_cap, cooldown_min ≤ cooldown_max), which
// need the values in force. The config file's settings are checked so at
// load, before the gateway opens its store.
func Check(changes map[string]string) error {
	for _, k := range sortedKeys(changes) {
		f, ok := fields[k]
		if !ok {
			return wamux.Errorf(wamux.EInvalid, "unknown setting %q", k)
		}
		var scratch Values
		if err := f.set(&scratch, changes[k]); err != nil {
			return wamux.Errorf(wamux.EInvalid, "setting %s: %v", k, err)
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Store is what settings need of the store.
type Store interface {
	Settings(ctx context.Context) (map[string]string, error)
	PutSettings(ctx context.Context, kv map[string]string) error
}

// Manager owns the current snapshot and its persistence.
type Manager struct {
	store Store
	log   *slog.Logger
	cur   atomic.Pointer[Values]

	mu        sync.Mutex // serialises changes
	listeners []func(old, next Values)
	// peers, when shared (Share), tells the other nodes' Managers of each
	// change.
	peers atomic.Pointer[peers]
}

// Load reads the stored settings over the defaults. A stored key this
// version does not know is logged and ignored, so a rollback does not fail
// to start.
func Load(ctx context.Context, st Store, log *slog.Logger) (*Manager, error) {
	stored, err := st.Settings(ctx)
	if err != nil {
		return nil, fmt.Errorf("load settings: %w", err)
	}
	v := fromStored(stored, log)
	m := &Manager{store: st, log: log}
	m.cur.Store(&v)
	return m, nil
}

// fromStored applies stored settings over the defaults; a key that does
// not apply is logged and ignored.
func fromStored(stored map[string]string, log *slog.Logger) Values {
	// The stored keys were validated together (backoff_base with
	// backoff_cap, cooldown_min with cooldown_max), so they are applied
	// together; only when that fails are they taken one at a time, each
	// round retrying what an earlier key may have made valid.
	v := Defaults()
	if next, err := v.Apply(stored); err == nil {
		v = next
	} else {
		pending := sortedKeys(stored)
		for progress := true; progress && len(pending) > 0; {
			progress = false
			var left []string
			for _, k := range pending {
				next, err := v.Apply(map[string]string{k: stored[k]})
				if err != nil {
					left = append(left, k)
					continue
				}
				v, progress = next, true
			}
			pending = left
		}
		for _, k := range pending {
			_, err := v.Apply(map[string]string{k: stored[k]})
			log.Warn("ignoring stored setting", "key", k, "err", err)
		}
	}
	return v
}

// Current returns the snapshot in force; cheap enough for every loop.
func (m *Manager) Current() Values { return *m.cur.Load() }

// OnChange registers fn, called after each successful change with the old
// and new snapshot (under the change lock: keep it quick).
func (m *Manager) OnChange(fn func(old, next Values)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.listeners = append(m.listeners, fn)
}

// Update validates the changes against the current snapshot, stores them,
// then swaps the snapshot in. Nothing changes when validation or the store
// fails.
func (m *Manager) Update(ctx context.Context, changes map[string]string) (Values, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.cur.Load()
	next, err := old.Apply(changes)
	if err != nil {
		return old, err
	}
	canon := next.Map()
	toStore := make(map[string]string, len(changes))
	for k := range changes {
		toStore[k] = canon[k]
	}
	if err := m.store.PutSettings(ctx, toStore); err != nil {
		return old, fmt.Errorf("store settings: %w", err)
	}
	m.swap(ctx, old, next, sortedKeys(toStore))
	m.tellPeers(ctx)
	return next, nil
}

// swap puts next in force, logs the keys among keys that changed and
// calls the listeners. The caller holds mu.
func (m *Manager) swap(ctx context.Context, old, next Values, keys []string) {
	m.cur.Store(&next)
	oldMap, canon := old.Map(), next.Map()
	for _, k := range keys {
		if oldMap[k] != canon[k] {
			m.log.InfoContext(ctx, "setting changed", "key", k, "old", oldMap[k], "new", canon[k])
		}
	}
	for _, fn := range m.listeners {
		fn(old, next)
	}
}
