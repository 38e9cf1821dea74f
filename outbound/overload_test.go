package outbound_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/wamux/wamux"
	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
)

// TestBare503IsUnknownAndSlowsTheAccount: an HTTP 503 without an error
// code (Meta's edge, not the API) may or may not have taken the message,
// so it is an unknown outcome: not resent before the quiet period, in
// which a status naming the msg_id can still resolve it (reference §7).
// It also says the provider is overloaded, so the account slows down
// like after a throttle (reference §2: "Treat any HTTP 429 or 503 without
// a recognised code as a retryable throttle too").
func TestBare503IsUnknownAndSlowsTheAccount(t *testing.T) {
	clk := fakeclock.New() // frozen: the quiet period never ends by itself
	to := "15556500001"
	bare503 := cloudapi.Classify(http.StatusServiceUnavailable, []byte("<html><body>Service Unavailable</body></html>"), http.Header{}, nil)
	sp, wrap := newScripted(map[string]cloudapi.Result{to: bare503})
	e := newEnv(t, envOpts{clock: clk, provider: wrap})
	e.addAccount("acc", "6501", 100, 10, sim.Limits{Rate: 1000})
	m := textMsg(t, admit.Request{AccountID: "acc", To: to})
	e.submit(m)
	testwait.For(t, "the 503 handled", 10*time.Second, func() bool {
		return sp.callsTo(to) == 1 && e.status(m.ID) == wamux.StatusUnknown
	})
	if lim := e.d.LimitState("acc"); lim.EffectiveRate >= lim.Rate {
		t.Fatalf("after a bare 503 the account sends at %v/s of %v/s; want it slowed down", lim.EffectiveRate, lim.Rate)
	}
	// No error code, like a bare 429.
	if got := metric(t, e, "wamux_provider_throttled_total", map[string]string{"account": "acc", "code": "-1"}); got != 1 {
		t.Fatalf("throttled{code=-1} = %v, want 1", got)
	}
}
