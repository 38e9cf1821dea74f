package sim_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/wamux/wamux/sim"
)

func TestThroughputLimitFollowsClock(t *testing.T) {
	h := start(t, sim.Config{Limits: sim.Limits{Rate: 10, Burst: 5}})
	accepted := 0
	for i := range 8 {
		if code, _, _ := h.send(num, token, text(fmt.Sprint("1555000", 1000+i), "")); code == 200 {
			accepted++
		}
	}
	if accepted != 5 {
		t.Fatalf("accepted %d of 8 at one instant, want the burst of 5", accepted)
	}
	h.clk.Advance(100 * time.Millisecond) // one interval at 10/s
	if code, _, _ := h.send(num, token, text("15550002000", "")); code != 200 {
		t.Fatalf("after one interval: %d", code)
	}
	if code, body, _ := h.send(num, token, text("15550002001", "")); code != 400 || !contains(body, `"code":130429`) {
		t.Fatalf("second after one interval: %d %s", code, body)
	}
	st := h.s.Stats().Numbers[num]
	if st.Requests != 10 || st.Accepted != 6 || st.OverLimit != 4 || st.Rejected[130429] != 4 {
		t.Fatalf("stats %+v", st)
	}
	if st.PeakRequestsPerSec != 10 || st.PeakAcceptedPerSec != 6 {
		t.Fatalf("peaks %d/%d, want 10/6", st.PeakRequestsPerSec, st.PeakAcceptedPerSec)
	}
}

func TestPairLimitPerRecipient(t *testing.T) {
	h := start(t, sim.Config{Limits: sim.Limits{PairInterval: 6 * time.Second, PairBurst: 3}})
	for i := range 3 {
		if code, _, _ := h.send(num, token, text("15550001111", "")); code != 200 {
			t.Fatalf("burst send %d: %d", i, code)
		}
	}
	if code, body, _ := h.send(num, token, text("+15550001111", "")); code != 400 || !contains(body, `"code":131056`) {
		t.Fatalf("over the pair burst (same number with +): %d %s", code, body)
	}
	if code, _, _ := h.send(num, token, text("15550002222", "")); code != 200 {
		t.Fatalf("other recipient: %d", code)
	}
	// The burst of 3 borrowed 3 intervals: nothing more until 18 s.
	h.clk.Advance(6 * time.Second)
	if code, _, _ := h.send(num, token, text("15550001111", "")); code != 400 {
		t.Fatalf("one interval after the burst: %d", code)
	}
	h.clk.Advance(11 * time.Second)
	if code, _, _ := h.send(num, token, text("15550001111", "")); code != 400 {
		t.Fatalf("before the borrowed quota is repaid: %d", code)
	}
	h.clk.Advance(time.Second)
	if code, _, _ := h.send(num, token, text("15550001111", "")); code != 200 {
		t.Fatalf("after the borrowed quota is repaid: %d", code)
	}
	if st := h.s.Stats().Numbers[num]; st.PairOverLimit != 3 || st.Accepted != 5 {
		t.Fatalf("stats %+v", st)
	}
}

func TestPerNumberLimitsOverrideDefaults(t *testing.T) {
	h := start(t, sim.Config{
		Limits: sim.Limits{Rate: 1000},
		Numbers: []sim.Number{
			{PhoneNumberID: "a", AccessToken: "ta", Limits: sim.Limits{Rate: 1}},
			{PhoneNumberID: "b", AccessToken: "tb"},
		},
	})
	for i := range 3 {
		h.send("a", "ta", text(fmt.Sprint("1555000000", i), ""))
		h.send("b", "tb", text(fmt.Sprint("1555000000", i), ""))
	}
	st := h.s.Stats()
	if st.Numbers["a"].Accepted != 1 || st.Numbers["b"].Accepted != 3 {
		t.Fatalf("a %+v b %+v", st.Numbers["a"], st.Numbers["b"])
	}
	if st.Numbers["a"].Limits.Burst != 1 || st.Numbers["b"].Limits.Burst != 1000 {
		t.Fatalf("limits a %+v b %+v", st.Numbers["a"].Limits, st.Numbers["b"].Limits)
	}
}

// Reference §3 (✅ [S3]): bursts of up to 45 messages to one user are
// allowed but "borrow" future quota: after a burst of 20 the next message
// to that user waits ~2 min (20 × 6 s). A limiter that lets the pair go on
// sending once the burst is over (as a token bucket of 45 would) makes a
// gateway that bursts, pauses and bursts again pass against the sim while
// Meta would answer 131056.
func TestPairBurstBorrowsFutureQuota(t *testing.T) {
	h := start(t, sim.Config{})
	to := "15550001111"
	send := func() int {
		t.Helper()
		code, _, _ := h.send(num, token, text(to, ""))
		return code
	}
	for i := range 20 {
		if c := send(); c != 200 {
			t.Fatalf("burst message %d: %d", i, c)
		}
	}
	h.clk.Advance(7 * time.Second)
	if c := send(); c != 400 {
		t.Fatalf("7 s after a burst of 20: %d, want 131056 (the burst borrowed 2 min)", c)
	}
	h.clk.Advance(112 * time.Second) // 119 s after the burst
	if c := send(); c != 400 {
		t.Fatalf("119 s after a burst of 20: %d, want 131056", c)
	}
	h.clk.Advance(time.Second) // 120 s: the quota is repaid
	if c := send(); c != 200 {
		t.Fatalf("120 s after a burst of 20: %d", c)
	}

	// At the sustained pace of one per 6 s nothing is ever refused.
	to = "15550002222"
	h.clk.Advance(time.Hour)
	for i := range 10 {
		if c := send(); c != 200 {
			t.Fatalf("paced message %d: %d", i, c)
		}
		h.clk.Advance(6 * time.Second)
	}

	// A burst of 45 at once is the most; it borrows 45 × 6 s = 270 s.
	to = "15550003333"
	h.clk.Advance(time.Hour)
	for i := range 45 {
		if c := send(); c != 200 {
			t.Fatalf("burst message %d: %d", i, c)
		}
	}
	if c := send(); c != 400 {
		t.Fatalf("46th at once: %d", c)
	}
	h.clk.Advance(6 * time.Second)
	if c := send(); c != 400 {
		t.Fatalf("6 s after a burst of 45: %d, want 131056", c)
	}
	h.clk.Advance(264 * time.Second)
	if c := send(); c != 200 {
		t.Fatalf("270 s after a burst of 45: %d", c)
	}
}

// Reference §2 (131056, ✅ [S1]): after a pair rate limit hit "you can
// still send to a different number without waiting". A send refused with
// 131056 went nowhere, so it must not take the number's throughput (as a
// send refused with 130429 does not); were it charged, a gateway retrying
// one hot recipient would see 130429 for everyone else.
func TestPairLimitedSendTakesNoThroughput(t *testing.T) {
	h := start(t, sim.Config{Limits: sim.Limits{Rate: 2, Burst: 2, PairBurst: 1}})
	if code, body, _ := h.send(num, token, text("15550001111", "")); code != 200 {
		t.Fatalf("first send: %d %s", code, body)
	}
	for i := range 3 {
		if code, body, _ := h.send(num, token, text("15550001111", "")); code != 400 || !contains(body, `"code":131056`) {
			t.Fatalf("send %d to the same recipient: %d %s", i, code, body)
		}
	}
	if code, body, _ := h.send(num, token, text("15550002222", "")); code != 200 {
		t.Fatalf("another recipient after 131056s at the same instant: %d %s, want 200 (one of two slots used)", code, body)
	}
	if code, body, _ := h.send(num, token, text("15550003333", "")); code != 400 || !contains(body, `"code":130429`) {
		t.Fatalf("third recipient: %d %s, want 130429 (both slots used)", code, body)
	}
	if st := h.s.Stats().Numbers[num]; st.Accepted != 2 || st.PairOverLimit != 3 || st.OverLimit != 1 {
		t.Fatalf("stats %+v", st)
	}
}
