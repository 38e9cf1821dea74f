package events

import (
	"time"
)

// Attempt is one delivery attempt as GET …/deliveries lists it.
type Attempt struct {
	EventID    string        `json:"event_id"`
	Type       string        `json:"type"`
	Attempt    int           `json:"attempt"`
	At         time.Time     `json:"at"`
	StatusCode int           `json:"status_code,omitempty"`
	Latency    time.Duration `json:"-"`
	LatencyMS  float64       `json:"latency_ms"`
	Error      string        `json:"error,omitempty"`
}

// recentAttempts is how many attempts are kept per subscription.
const recentAttempts = 100

// attempts is a ring of a subscription's latest attempts (in memory: an
// operator's view of delivery health, not a record).
type attempts struct {
	buf  [recentAttempts]Attempt
	next int
	n    int
}

func (a *attempts) add(at Attempt) {
	a.buf[a.next] = at
	a.next = (a.next + 1) % recentAttempts
	a.n = min(a.n+1, recentAttempts)
}

// newestFirst lists the kept attempts, newest first.
func (a *attempts) newestFirst() []Attempt {
	out := make([]Attempt, 0, a.n)
	for i := 1; i <= a.n; i++ {
		out = append(out, a.buf[(a.next-i+recentAttempts)%recentAttempts])
	}
	return out
}

func (m *Manager) record(sub string, o outcome) {
	at := Attempt{EventID: WebhookID(o.d.Event), Type: string(o.d.Event.Type), Attempt: o.d.Attempts + 1, At: o.at,
		StatusCode: o.status, Latency: o.latency, LatencyMS: float64(o.latency.Microseconds()) / 1000, Error: o.err}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.recent[sub]
	if r == nil {
		r = &attempts{}
		m.recent[sub] = r
	}
	r.add(at)
}

// Attempts returns a subscription's latest delivery attempts, newest first.
func (m *Manager) Attempts(sub string) []Attempt {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.recent[sub]; r != nil {
		return r.newestFirst()
	}
	return []Attempt{}
}
