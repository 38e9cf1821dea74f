package outbound

import (
	"log/slog"
	"sync"
	"time"

	"github.com/wamux/wamux/provider/cloudapi"
)

// throttleLog logs the provider's throttle answers (130429, 131056, 4,
// 80007, and the like) at Warn: the first of each code for an account, then
// at most one a cooldown_min per account and code, with how many came in
// between. Each answer is counted in wamux_provider_throttled_total
// whatever is logged.
type throttleLog struct {
	mu   sync.Mutex
	last map[throttleKey]throttleSeen
}

type throttleKey struct {
	account string
	code    int
}

type throttleSeen struct {
	at      time.Time // when the last line was logged
	unnoted int       // answers since then not logged
}

// note logs a throttle answer for account unless one with its code was
// logged less than every ago. attrs are added to the line.
func (l *throttleLog) note(log *slog.Logger, now time.Time, every time.Duration, account string, res cloudapi.Result, attrs ...any) {
	k := throttleKey{account, res.Code}
	l.mu.Lock()
	if l.last == nil {
		l.last = make(map[throttleKey]throttleSeen)
	}
	s, seen := l.last[k]
	if seen && now.Sub(s.at) < every && !now.Before(s.at) {
		s.unnoted++
		l.last[k] = s
		l.mu.Unlock()
		return
	}
	l.last[k] = throttleSeen{at: now}
	l.mu.Unlock()
	args := append([]any{"account_id", account, "code", res.Code, "http_status", res.HTTPStatus, "reason", res.Reason,
		"since_last_logged", s.unnoted}, attrs...)
	log.Warn("provider throttled the account", args...)
}
