package outbound_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/wamux/wamux/admit"
	"github.com/wamux/wamux/internal/fakeclock"
	"github.com/wamux/wamux/internal/testwait"
	"github.com/wamux/wamux/provider/cloudapi"
	"github.com/wamux/wamux/sim"
)

// TestUnlistedThrottleCodeCountedAsOther: a 429 and a 503 carrying an error
// code the classification does not list (a proxy's, or a new one of
// Meta's) are counted under code "other", so a provider cannot grow the
// throttle metric by one series per code it sends.
func TestUnlistedThrottleCodeCountedAsOther(t *testing.T) {
	clk := fakeclock.New() // frozen: the refused messages are not sent again
	body := []byte(`{"error":{"message":"slow down","type":"OAuthException","code":987654}}`)
	sp, wrap := newScripted(map[string]cloudapi.Result{
		"15556600001": cloudapi.Classify(http.StatusTooManyRequests, body, http.Header{}, nil),
		"15556600002": cloudapi.Classify(http.StatusServiceUnavailable, body, http.Header{}, nil),
	})
	e := newEnv(t, envOpts{clock: clk, provider: wrap})
	e.addAccount("acc", "6601", 100, 10, sim.Limits{Rate: 1000})
	e.submit(textMsg(t, admit.Request{AccountID: "acc", To: "15556600001"}),
		textMsg(t, admit.Request{AccountID: "acc", To: "15556600002"}))
	throttled := func(code string) float64 {
		want := map[string]string{"account": "acc"}
		if code != "" {
			want["code"] = code
		}
		return metric(t, e, "wamux_provider_throttled_total", want)
	}
	testwait.For(t, "both refusals counted", 10*time.Second, func() bool {
		return sp.callsTo("15556600001") == 1 && sp.callsTo("15556600002") == 1 && throttled("") == 2
	})
	if got := throttled("other"); got != 2 {
		t.Fatalf("throttled{code=other} = %v, want 2 (987654 = %v)", got, throttled("987654"))
	}
}
